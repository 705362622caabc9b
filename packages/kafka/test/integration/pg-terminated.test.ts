import type { Admin, Kafka, Message } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTestPool,
  createTopicsReady,
  freshDb,
  kafkaClient,
  message,
  produce,
  SCALE,
  type TestDb,
  uniqueName,
  waitForCommitted,
} from '../../../../test/support/index.js';
import { createKafkaConsumer, type KafkaClient } from '../../src/index.js';
import { clientUnderTest } from './fixtures/client-under-test.js';

// A fault while messages are in flight, on any client (ONCE_KAFKA_CLIENT): the consumer's
// PostgreSQL backends terminated again and again mid-batch. Every transaction they were in rolls
// back, so its messages must run again and their offsets must not be committed before they do.
// (The Kafka side of the same storm, sockets cut at the client, is kafkajs-only: faults.test.ts.)

const N = Math.round(3_000 * SCALE);
let db: TestDb;
let kafka: Kafka;
/** The client of the consumer under test (ONCE_KAFKA_CLIENT). */
let client: KafkaClient;
let admin: Admin;
const stops: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_pg_terminated', 4);
  kafka = kafkaClient('once-pg-terminated');
  client = await clientUnderTest('once-pg-terminated');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  await admin.disconnect();
  await db.close();
});

it('PostgreSQL backends terminated mid-batch: recovers, exactly once', { timeout: 120_000 }, async () => {
  const topic = uniqueName('pg-kill');
  await createTopicsReady(admin, { [topic]: 3 });
  const ids = Array.from({ length: N }, (_, i) => `${topic}-${i}`);
  const messages: Message[] = ids.map((id, i) => message(id, `k${i % 30}`));
  await produce(kafka, topic, messages);
  const ledger = await db.ledger('pgkill');
  const app = uniqueName('once-victim');
  const victimPool = createTestPool({ max: 6, application_name: app });
  stops.push(() => victimPool.end());
  const consumer = createKafkaConsumer({
    kafka: client,
    groupId: uniqueName('g-once'),
    topics: [topic],
    pool: victimPool,
    schema: db.schema,
    fromBeginning: true,
    deadLetterTopic: false,
    batchSize: 50,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    retryDelayMs: () => 100,
    maxAttempts: 100,
    handler: async (envelope, { tx, id }) => {
      await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: '' });
    },
  });
  stops.push(() => consumer.stop());
  const count = async () =>
    Number((await db.pool.query(`SELECT count(*) AS n FROM ${ledger.table}`)).rows[0].n);
  await consumer.start();
  let kills = 0;
  while ((await count()) < N * 0.9 && kills < 200) {
    const { rows } = await db.pool.query(
      'SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = $1',
      [app],
    );
    kills += rows[0].n;
    await new Promise((r) => setTimeout(r, 150));
  }
  await waitForCommitted(admin, consumer.options.groupId, topic);
  expect(kills).toBeGreaterThan(5);
  const verdict = await ledger.check({ expectedIds: ids, checkOrderPerKey: true });
  expect(verdict.lost).toEqual([]);
  expect(verdict.duplicated).toEqual([]);
  expect(verdict.ok).toBe(true);
});
