import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  freshDb,
  kafkaClient,
  type TestDb,
  uniqueName,
  waitForCommitted,
} from '../../../../test/support/index.js';
import {
  createKafkaConsumer,
  createKafkaPublisher,
  type KafkaConsumer,
  type KafkaPublisher,
} from '../../src/index.js';
import { kafkajs } from '../../src/kafkajs.js';

// kafkajs only, whatever ONCE_KAFKA_CLIENT says: the client option as the docs write it for
// kafkajs, kafkajs(new Kafka(...)) from '@once/kafka/kafkajs', for the publisher and the consumer,
// on the real broker and PostgreSQL. scripts/kafka-clients-check leaves this file out of the other
// clients' runs.
let db: TestDb;
let kafka: Kafka;
let admin: Admin;
let publisher: KafkaPublisher | undefined;
let consumer: KafkaConsumer | undefined;

beforeAll(async () => {
  db = await freshDb('kafka_entry', 2);
  kafka = kafkaClient('once-entry');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await consumer?.stop();
  await publisher?.stop();
  await admin.disconnect();
  await db.close();
});

it('kafkajs(new Kafka(...)) publishes and consumes, each message once, offsets committed', async () => {
  const topic = uniqueName('entry');
  await createTopicsReady(admin, { [topic]: 2 });
  const client = kafkajs(kafka);
  expect(client.name).toBe('kafkajs');
  publisher = createKafkaPublisher({ kafka: client });
  const rows = Array.from({ length: 30 }, (_, i) => ({
    id: `${topic}-${i}`,
    destination: topic,
    key: `k${i % 3}`,
    body: Buffer.from(String(i)),
  }));
  expect((await publisher.publish(rows)).every((r) => r.ok)).toBe(true);
  await publisher.publish(rows.slice(0, 10)); // a relay's re-send: deduplicated downstream
  const ledger = await db.ledger('entry');
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
}, 120_000);
