import { migrate } from '@once/core';
import type { Admin, Kafka } from 'kafkajs';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  dropSchema,
  FaultProxy,
  freshDb,
  freshSchemaName,
  kafkaClient,
  message,
  produce,
  serviceUrls,
  type TestDb,
  uniqueName,
  waitFor,
  waitForCommitted,
} from '../../../../test/support/index.js';
import { createKafkaConsumer, type KafkaClient, type KafkaConsumer } from '../../src/index.js';
import { clientUnderTest } from './fixtures/client-under-test.js';

// While PostgreSQL or once's schema cannot be used, the consumer holds its partitions (a client
// pause: nothing is fetched, nothing run, spent or dead-lettered) and reports unhealthy; start()
// does not fail for it. Once the schema checks out, every message runs once.

let db: TestDb;
let kafka: Kafka;
/** The client of the consumers and publishers under test (ONCE_KAFKA_CLIENT). */
let client: KafkaClient;
let admin: Admin;
const cleanup: (() => Promise<void>)[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_dbdown');
  kafka = kafkaClient('once-dbdown');
  client = await clientUnderTest('once-dbdown');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
  await admin.disconnect();
  await db.close();
});

/** A consumer whose every run records the message in `<schema>.effects`, counting what it sees. */
function consumerOn(pool: pg.Pool, schema: string, topic: string) {
  const seen = { notRun: 0, deadLettered: 0, paused: 0, resumed: 0 };
  const consumer: KafkaConsumer = createKafkaConsumer({
    kafka: client,
    groupId: uniqueName('g-dbdown'),
    topics: [topic],
    pool,
    schema,
    fromBeginning: true,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    maxAttempts: 2,
    handler: async (envelope, { tx }) => {
      await tx.query(`INSERT INTO ${schema}.effects (id) VALUES ($1)`, [envelope.id]);
    },
  });
  consumer.inbox.on('message:not-run', () => seen.notRun++);
  consumer.on('message:dead-lettered', () => seen.deadLettered++);
  consumer.on('consumer:paused', () => seen.paused++);
  consumer.on('consumer:resumed', () => seen.resumed++);
  cleanup.push(() => consumer.stop());
  return { consumer, seen };
}

async function effectsOf(schema: string): Promise<Map<string, number>> {
  const { rows } = await db.pool.query<{ id: string; n: number }>(
    `SELECT id, count(*)::int AS n FROM ${schema}.effects GROUP BY id`,
  );
  return new Map(rows.map((r) => [r.id, r.n]));
}

async function newTopic(prefix: string, ids: string[]): Promise<string> {
  const topic = uniqueName(prefix);
  await createTopicsReady(admin, { [topic]: 2, [`${topic}.dlq`]: 1 });
  await produce(
    kafka,
    topic,
    ids.map((id, i) => message(id, `k${i % 4}`)),
  );
  return topic;
}

it('start() succeeds while PostgreSQL is unreachable; the consumer fetches nothing, then runs everything once it is back', {
  timeout: 120_000,
}, async () => {
  const proxy = await FaultProxy.start(new URL(serviceUrls().databaseUrl).host);
  cleanup.push(() => proxy.close());
  proxy.refuse(true);
  const pool = new pg.Pool({ connectionString: proxy.url(serviceUrls().databaseUrl), max: 4 });
  cleanup.push(() => pool.end());
  const ids = Array.from({ length: 20 }, (_, i) => uniqueName(`down-${i}`));
  const topic = await newTopic('dbdown', ids);
  const { consumer, seen } = consumerOn(pool, db.schema, topic);

  await consumer.start();
  expect(consumer.state).toBe('running');
  expect(consumer.health()).toMatchObject({ healthy: false, available: false });
  expect(consumer.health().lastError?.where).toBe('database');
  // Long enough for the client to join, be assigned both partitions and fetch them.
  await waitFor(
    'the group to assign the partitions',
    () => (consumer.health().assignment[topic]?.length ?? 0) === 2,
  );
  await new Promise((r) => setTimeout(r, 3_000));
  expect(await effectsOf(db.schema)).toEqual(new Map());
  // Nothing was handed to the inbox while the database was away: the partitions were held.
  expect(seen.notRun).toBe(0);
  expect(consumer.health().healthy).toBe(false);

  proxy.refuse(false);
  await waitForCommitted(admin, consumer.options.groupId, topic);
  const effects = await effectsOf(db.schema);
  expect([...effects.keys()].sort()).toEqual([...ids].sort());
  expect([...effects.values()].every((n) => n === 1)).toBe(true);
  expect(seen).toMatchObject({ deadLettered: 0, resumed: 1 });
  expect(consumer.health()).toMatchObject({ healthy: true, available: true });
});

it('a consumer started before migrate() dead-letters nothing and begins once migrated', {
  timeout: 120_000,
}, async () => {
  const schema = freshSchemaName('kafka_premigrate');
  cleanup.push(() => dropSchema(db.pool, schema));
  const ids = Array.from({ length: 12 }, (_, i) => uniqueName(`pre-${i}`));
  const topic = await newTopic('premigrate', ids);
  const { consumer, seen } = consumerOn(db.pool, schema, topic);

  await consumer.start();
  expect(consumer.health()).toMatchObject({ state: 'running', healthy: false, available: false });
  expect(consumer.health().lastError?.code).toBe('SCHEMA_NOT_INSTALLED');
  await waitFor(
    'the group to assign the partitions',
    () => (consumer.health().assignment[topic]?.length ?? 0) === 2,
  );
  await new Promise((r) => setTimeout(r, 2_000));
  expect(seen).toMatchObject({ notRun: 0, deadLettered: 0 });

  await migrate(db.pool, { schema });
  await db.pool.query(`CREATE TABLE ${schema}.effects (id text NOT NULL)`);
  await waitForCommitted(admin, consumer.options.groupId, topic);
  const effects = await effectsOf(schema);
  expect([...effects.keys()].sort()).toEqual([...ids].sort());
  expect([...effects.values()].every((n) => n === 1)).toBe(true);
  expect(seen.deadLettered).toBe(0);
  expect(consumer.health().healthy).toBe(true);
});

it('when PostgreSQL goes away mid-run the consumer pauses its partitions, and resumes when it is back', {
  timeout: 120_000,
}, async () => {
  const proxy = await FaultProxy.start(new URL(serviceUrls().databaseUrl).host);
  cleanup.push(() => proxy.close());
  const pool = new pg.Pool({ connectionString: proxy.url(serviceUrls().databaseUrl), max: 4 });
  cleanup.push(() => pool.end());
  const first = Array.from({ length: 10 }, (_, i) => uniqueName(`mid-a${i}`));
  const topic = await newTopic('dbmid', first);
  const { consumer, seen } = consumerOn(pool, db.schema, topic);
  await consumer.start();
  await waitForCommitted(admin, consumer.options.groupId, topic);
  expect(consumer.health().healthy).toBe(true);

  proxy.refuse(true);
  proxy.cutAll();
  const second = Array.from({ length: 10 }, (_, i) => uniqueName(`mid-b${i}`));
  await produce(
    kafka,
    topic,
    second.map((id, i) => message(id, `k${i % 4}`)),
  );
  await waitFor('the consumer to pause', () => seen.paused > 0, 30_000);
  expect(consumer.health()).toMatchObject({ healthy: false, available: false });
  // Paused: the held partitions are not fetched and failed again and again.
  await new Promise((r) => setTimeout(r, 1_000));
  const notRun = seen.notRun;
  await new Promise((r) => setTimeout(r, 3_000));
  expect(seen.notRun).toBe(notRun);

  proxy.refuse(false);
  await waitForCommitted(admin, consumer.options.groupId, topic);
  const effects = await effectsOf(db.schema);
  for (const id of [...first, ...second]) expect(effects.get(id)).toBe(1);
  expect(seen.deadLettered).toBe(0);
  expect(consumer.health().healthy).toBe(true);
});
