import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  freshDb,
  header,
  kafkaClient,
  readTopic,
  type TestDb,
  uniqueName,
  waitForCommitted,
} from '../../../../test/support/index.js';
import {
  createKafkaConsumer,
  createKafkaPublisher,
  type KafkaClient,
  type KafkaConsumer,
  type KafkaPublisher,
} from '../../src/index.js';
import { clientUnderTest } from './fixtures/client-under-test.js';

let db: TestDb;
let kafka: Kafka;
/** The client of the consumers and publishers under test (ONCE_KAFKA_CLIENT). */
let client: KafkaClient;
let admin: Admin;
let publisher: KafkaPublisher;
let consumer: KafkaConsumer | undefined;

beforeAll(async () => {
  db = await freshDb('kafka_pub', 4);
  kafka = kafkaClient('once-pub');
  client = await clientUnderTest('once-pub');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await consumer?.stop();
  await publisher?.stop();
  await admin.disconnect();
  await db.close();
});

it('publishes with the id header, in order per key, and a re-send is deduplicated downstream', async () => {
  const topic = uniqueName('pub');
  await createTopicsReady(admin, { [topic]: 3 });
  publisher = createKafkaPublisher({ kafka: client });
  const rows = Array.from({ length: 20 }, (_, i) => ({
    id: `${topic}-row-${i}`,
    destination: topic,
    key: `order-${i % 4}`,
    body: Buffer.from(JSON.stringify({ i })),
    headers: { 'content-type': 'application/json' },
  }));
  const results = await publisher.publish([
    ...rows,
    { id: 'x'.repeat(513), destination: topic, key: undefined, body: Buffer.from('{}'), headers: {} },
  ]);
  expect(results.filter((r) => r.ok).map((r) => r.id)).toEqual(rows.map((r) => r.id));
  expect(results.at(-1)).toMatchObject({ ok: false, retryable: false });
  // A relay that crashed before marking the rows sent publishes them again.
  await publisher.publish(rows.slice(0, 5));

  const read = await readTopic(kafka, topic, 25);
  expect(read).toHaveLength(25);
  expect(read.every((m) => header(m, 'content-type') === 'application/json')).toBe(true);
  expect(new Set(read.map((m) => header(m, 'message-id')))).toEqual(new Set(rows.map((r) => r.id)));

  const ledger = await db.ledger('pub');
  consumer = createKafkaConsumer({
    kafka: client,
    groupId: uniqueName('g'),
    topics: [topic],
    pool: db.pool,
    schema: db.schema,
    fromBeginning: true,
    deadLetterTopic: false,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    handler: async (envelope, { tx, id }) =>
      ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: '' }),
  });
  await consumer.start();
  await waitForCommitted(admin, consumer.options.groupId, topic);
  expect((await ledger.check({ expectedIds: rows.map((r) => r.id), checkOrderPerKey: true })).ok).toBe(true);
});

it('refuses bad options and a stopped publisher', async () => {
  expect(() => createKafkaPublisher({ kafka: {} as never })).toThrow(/option 'kafka'/);
  expect(() => createKafkaPublisher({ kafka: client, ackTimeoutMs: 0 })).toThrow(/option 'ackTimeoutMs'/);
  const p = createKafkaPublisher({ kafka: client });
  await p.stop();
  await expect(p.publish([{ id: 'a', destination: 't', body: Buffer.from('') }])).rejects.toMatchObject({
    code: 'CLOSED',
  });
});
