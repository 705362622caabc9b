import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
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
import { createKafkaConsumer, type KafkaConsumer } from '../../src/index.js';
import { startNaiveConsumer } from './fixtures/naive-consumer.js';

let db: TestDb;
let kafka: Kafka;
let admin: Admin;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_fence', 10);
  kafka = kafkaClient('once-fence');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  for (const stop of stops) await stop();
  await admin.disconnect();
  await db.close();
});

// Batch mode only: fenced envelopes run one per transaction in either mode (core's path is the same).
describe.each<'batch' | 'message'>(['batch'])('offset fencing, %s mode', (mode) => {
  const n = Math.round(600 * SCALE);
  it(`${n} messages, then the group re-reads from the beginning: one effect each, no inbox rows`, async () => {
    const topic = uniqueName(`fence-${mode}`);
    await createTopicsReady(admin, { [topic]: 3, [`${topic}.dlq`]: 1 });
    const prefix = uniqueName('m');
    const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
    await produce(
      kafka,
      topic,
      ids.map((id, i) => message(id, `k${i % 12}`)),
    );
    const ledger = await db.ledger('once');
    const groupId = uniqueName('g-fence');
    let processed = 0;
    let duplicates = 0;
    const run = async () => {
      const consumer: KafkaConsumer = createKafkaConsumer({
        kafka,
        groupId,
        topics: [topic],
        pool: db.pool,
        schema: db.schema,
        batch: mode === 'batch',
        offsetFencing: true,
        fromBeginning: true,
        sessionTimeoutMs: 8_000,
        heartbeatIntervalMs: 1_000,
        handler: async (envelope, { tx, id }) => {
          await ledger.record(tx, {
            messageId: id,
            key: envelope.key ?? '',
            payload: envelope.body.toString(),
          });
        },
      });
      stops.push(() => consumer.stop());
      consumer.inbox.on('message:processed', () => processed++);
      consumer.inbox.on('message:duplicate', () => duplicates++);
      await consumer.start();
      await waitForCommitted(admin, groupId, topic);
      await consumer.stop();
      expect(consumer.health().lastError).toBeUndefined();
    };
    await run();
    expect(processed).toBe(n);
    // Kafka forgets the group's progress: a new consumer instance reads everything again.
    await admin.resetOffsets({ groupId, topic, earliest: true });
    await run();
    expect(processed).toBe(n);
    // Duplicates, all of them, except that the fence check may seek a partition straight to its
    // fenced message (when the first fetch does not reach it): the offsets before it are not read.
    expect(duplicates).toBeGreaterThan(0);
    expect(duplicates).toBeLessThanOrEqual(n);

    const verdict = await ledger.check({ expectedIds: ids, checkOrderPerKey: true });
    expect(verdict.lost).toEqual([]);
    expect(verdict.duplicated).toEqual([]);
    expect(verdict.ok).toBe(true);
    const rows = await db.pool.query(
      `SELECT count(*)::int AS n FROM ${db.schema}.inbox WHERE consumer = $1`,
      [groupId],
    );
    expect(rows.rows[0].n).toBe(0);
    const fences = await db.pool.query<{ n: string }>(
      `SELECT sum(next_offset)::text AS n FROM ${db.schema}.fences WHERE consumer = $1 AND stream = $2`,
      [groupId, topic],
    );
    expect(fences.rows[0]?.n).toBe(String(n));

    // The control: plain kafkajs re-reading after the same reset records every message twice.
    const controlLedger = await db.ledger('naive');
    const naiveGroup = uniqueName('g-naive');
    for (let round = 0; round < 2; round++) {
      const naive = await startNaiveConsumer(kafka, db.pool, controlLedger, naiveGroup, topic);
      stops.push(() => naive.disconnect());
      await waitForCommitted(admin, naiveGroup, topic);
      await naive.disconnect();
      if (round === 0) await admin.resetOffsets({ groupId: naiveGroup, topic, earliest: true });
    }
    const control = await controlLedger.check({ expectedIds: ids });
    expect(control.ok).toBe(false);
    expect(control.duplicated.length).toBe(n);
  });
});
