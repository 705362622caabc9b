import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  freshDb,
  serviceUrls,
  type TestDb,
  uniqueName,
} from '../../../../test/support/index.js';
import { createKafkaConsumer, createKafkaPublisher } from '../../src/index.js';

// kafkajs only, whatever ONCE_KAFKA_CLIENT says: a kafkajs warning, seen through a raw kafkajs
// instance's logCreator on purpose. scripts/kafka-clients-check leaves this file out of the other
// clients' runs.
// kafkajs 2 warns, once per process, about its new default partitioner whenever a producer is made
// without `createPartitioner`. The consumer's dead-letter producer and the publisher name kafkajs'
// default, so neither prints it. The warning is printed at most once per process, so the test
// ends with a control: a producer made without a partitioner does print it, which shows nothing
// before had already spent the one warning.

let db: TestDb;
const lines: string[] = [];
let kafka: Kafka;

beforeAll(async () => {
  db = await freshDb('kafka_partitioner', 4);
  delete process.env.KAFKAJS_NO_PARTITIONER_WARNING;
  kafka = new Kafka({
    clientId: 'once-partitioner',
    brokers: [...serviceUrls().kafkaBrokers],
    logLevel: logLevel.WARN,
    logCreator: () => (entry) => {
      lines.push(entry.log.message);
    },
  });
});
afterAll(async () => {
  await db.close();
});

const partitionerWarnings = () => lines.filter((m) => /partitioner/i.test(m));

it('the dead-letter producer and the publisher make kafkajs print no partitioner warning', {
  timeout: 60_000,
}, async () => {
  const topic = uniqueName('partitioner');
  const admin = kafka.admin();
  await admin.connect();
  await createTopicsReady(admin, { [topic]: 1, [`${topic}.dlq`]: 1 });
  await admin.disconnect();

  const consumer = createKafkaConsumer({
    kafka,
    groupId: uniqueName('g-partitioner'),
    topics: [topic],
    pool: db.pool,
    schema: db.schema,
    logger: false,
    handler: async () => {},
  });
  await consumer.start();
  await consumer.stop();
  const publisher = createKafkaPublisher({ kafka });
  await publisher.start();
  await publisher.stop();
  expect(partitionerWarnings()).toEqual([]);

  // The control: the one warning of this process is still unspent.
  kafka.producer();
  expect(partitionerWarnings()).toHaveLength(1);
});
