import type { Admin, Kafka, Message } from 'kafkajs';
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
import { createKafkaConsumer, type KafkaClient, type KafkaConsumer } from '../../src/index.js';
import { clientUnderTest } from './fixtures/client-under-test.js';
import { startNaiveConsumer } from './fixtures/naive-consumer.js';

let db: TestDb;
let kafka: Kafka;
/** The client of the consumers and publishers under test (ONCE_KAFKA_CLIENT). */
let client: KafkaClient;
let admin: Admin;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_dup', 12);
  kafka = kafkaClient('once-dup');
  client = await clientUnderTest('once-dup');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  for (const stop of stops) await stop();
  await admin.disconnect();
  await db.close();
});

/** `n` messages over 40 keys, and 30 % of them sent again later with the same id and body. */
function withDuplicates(prefix: string, n: number): { messages: Message[]; ids: string[] } {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  const messages: Message[] = [];
  ids.forEach((id, i) => {
    messages.push(message(id, `k${i % 40}`, { id, amount: i }));
    // The copy goes out a little later, after other messages of its key: a producer retry.
    if (i % 10 < 3 && i >= 20) {
      const j = i - 20;
      messages.push(message(ids[j]!, `k${j % 40}`, { id: ids[j], amount: j }));
    }
  });
  return { messages, ids };
}

describe.each<['batch' | 'message', number]>([
  ['batch', Math.round(5_000 * SCALE)],
  ['message', Math.round(1_000 * SCALE)],
])('producer duplicates, %s mode', (mode, n) => {
  it(`${n} messages with 30% re-sent with the same id: one effect each, order per key kept`, async () => {
    const topic = uniqueName(`dup-${mode}`);
    await createTopicsReady(admin, { [topic]: 6, [`${topic}.dlq`]: 1 });
    const prefix = uniqueName('m');
    const { messages, ids } = withDuplicates(prefix, n);
    await produce(kafka, topic, messages);
    expect(messages.length).toBeGreaterThan(n * 1.25);

    const ledger = await db.ledger('once');
    const controlLedger = await db.ledger('naive');
    const groupId = uniqueName('g-once');
    const consumer: KafkaConsumer = createKafkaConsumer({
      kafka: client,
      groupId,
      topics: [topic],
      pool: db.pool,
      schema: db.schema,
      batch: mode === 'batch',
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
    let duplicates = 0;
    consumer.inbox.on('message:duplicate', () => duplicates++);
    await consumer.start();
    await waitForCommitted(admin, groupId, topic);
    await consumer.stop();

    const verdict = await ledger.check({ expectedIds: ids, checkOrderPerKey: true });
    expect(verdict.lost).toEqual([]);
    expect(verdict.duplicated).toEqual([]);
    expect(verdict.orderViolations).toEqual([]);
    expect(verdict.ok).toBe(true);
    expect(duplicates).toBe(messages.length - n);
    expect(consumer.health().lastError).toBeUndefined();

    // The control: plain kafkajs on the same topic records every copy.
    const naiveGroup = uniqueName('g-naive');
    const naive = await startNaiveConsumer(kafka, db.pool, controlLedger, naiveGroup, topic);
    stops.push(() => naive.disconnect());
    await waitForCommitted(admin, naiveGroup, topic);
    await naive.disconnect();
    const control = await controlLedger.check({ expectedIds: ids });
    expect(control.ok).toBe(false);
    expect(control.duplicated.length).toBe(messages.length - n);
  });
});
