// fixed clients: kafkajs told it carries no commit metadata (the path @platformatic/kafka takes),
// whatever ONCE_KAFKA_CLIENT says.
import type { Admin, Kafka } from 'kafkajs';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  FaultProxy,
  freshDb,
  kafkaClient,
  message,
  produce,
  serviceUrls,
  type TestDb,
  uniqueName,
  waitFor,
  waitForCommitted,
} from '../../../../test/support/index.js';
import { createKafkaConsumer, type KafkaConsumer } from '../../src/index.js';
import { kafkajs } from '../../src/kafkajs.js';

// The database hold on a client without offset-commit metadata: the replay marker is a PostgreSQL
// row noted before every slice (schema version 11, `inflight`), so when PostgreSQL goes away the
// note is the first statement to fail. It holds the consumer as a message the inbox could not run
// does (every partition paused, the schema probed until it is back, nothing run, spent or
// dead-lettered), never a backoff that fetches the partition again and again. On kafkajs whose
// capabilities say so, so npm test covers the path without another client library.

let db: TestDb;
let kafka: Kafka;
let admin: Admin;
const cleanup: (() => Promise<void>)[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_dbdown_row');
  kafka = kafkaClient('once-dbdown-row');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
  await admin.disconnect();
  await db.close();
});

it('when PostgreSQL goes away mid-run, the failed inflight note holds the consumer; nothing runs unnoted, all runs once when it is back', {
  timeout: 120_000,
}, async () => {
  const proxy = await FaultProxy.start(new URL(serviceUrls().databaseUrl).host);
  cleanup.push(() => proxy.close());
  const pool = new pg.Pool({ connectionString: proxy.url(serviceUrls().databaseUrl), max: 4 });
  cleanup.push(() => pool.end());
  const topic = uniqueName('dbrow');
  await createTopicsReady(admin, { [topic]: 2, [`${topic}.dlq`]: 1 });
  const first = Array.from({ length: 10 }, (_, i) => uniqueName(`row-a${i}`));
  await produce(
    kafka,
    topic,
    first.map((id, i) => message(id, `k${i % 4}`)),
  );

  const seen = { notRun: 0, deadLettered: 0, paused: 0, resumed: 0 };
  const errors: string[] = [];
  const client = kafkajs(kafkaClient('once-dbdown-row-consumer'));
  const consumer: KafkaConsumer = createKafkaConsumer({
    kafka: { ...client, capabilities: { ...client.capabilities, commitMetadata: false } },
    groupId: uniqueName('g-dbrow'),
    topics: [topic],
    pool,
    schema: db.schema,
    fromBeginning: true,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    maxAttempts: 2,
    handler: async (envelope, { tx }) => {
      await tx.query(`INSERT INTO ${db.schema}.effects (id) VALUES ($1)`, [envelope.id]);
    },
  });
  consumer.inbox.on('message:not-run', () => seen.notRun++);
  consumer.on('message:dead-lettered', () => seen.deadLettered++);
  consumer.on('consumer:paused', () => seen.paused++);
  consumer.on('consumer:resumed', () => seen.resumed++);
  consumer.on('error', (e) => errors.push(e.where));
  cleanup.push(() => consumer.stop());
  await consumer.start();
  await waitForCommitted(admin, consumer.options.groupId, topic);
  expect(consumer.health().healthy).toBe(true);
  // The path under test: the markers are rows, one per partition that ran a slice.
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${db.schema}.inflight WHERE stream = $1`,
    [topic],
  );
  expect(rows[0]!.n).toBeGreaterThan(0);

  proxy.refuse(true);
  proxy.cutAll();
  const second = Array.from({ length: 10 }, (_, i) => uniqueName(`row-b${i}`));
  await produce(
    kafka,
    topic,
    second.map((id, i) => message(id, `k${i % 4}`)),
  );
  await waitFor('the consumer to hold', () => seen.paused > 0, 30_000);
  expect(consumer.health()).toMatchObject({ healthy: false, available: false });
  expect(consumer.health().lastError?.where).toBe('database');
  // Held: the partitions are not fetched and noted again and again.
  await new Promise((r) => setTimeout(r, 1_000));
  const notRun = seen.notRun;
  await new Promise((r) => setTimeout(r, 3_000));
  expect(seen.notRun).toBe(notRun);
  // The note failed before any slice of the new messages ran: the hold came from it, not from the
  // inbox, and it was no backoff (which reports the note's failure as an error).
  expect(seen.notRun).toBe(0);
  expect(errors).not.toContain('note-replay-marker');

  proxy.refuse(false);
  await waitForCommitted(admin, consumer.options.groupId, topic);
  const effects = await db.pool.query<{ id: string; n: number }>(
    `SELECT id, count(*)::int AS n FROM ${db.schema}.effects GROUP BY id`,
  );
  const counts = new Map(effects.rows.map((r) => [r.id, r.n]));
  for (const id of [...first, ...second]) expect(counts.get(id)).toBe(1);
  expect(seen).toMatchObject({ deadLettered: 0, resumed: 1 });
  expect(consumer.health().healthy).toBe(true);
});
