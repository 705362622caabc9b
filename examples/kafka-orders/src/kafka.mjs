// @ts-check
// The Kafka client and topics, configured by environment (the local broker by default).
import { Kafka, logLevel } from 'kafkajs';
import { onceKafkaClient } from '../../kafka-client.mjs';

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const KAFKA_BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');

/** A kafkajs client; its own logging is off (once's consumer reports through events). */
export function kafkaClient() {
  return new Kafka({ clientId: 'example-kafka-orders', brokers: KAFKA_BROKERS, logLevel: logLevel.NOTHING });
}

/**
 * The once client of the orders consumer, on the library ONCE_KAFKA_CLIENT names (kafkajs by
 * default; see ../../kafka-client.mjs). Topics and producing stay on {@link kafkaClient}.
 */
export function onceClient() {
  return onceKafkaClient({ clientId: 'example-kafka-orders', brokers: KAFKA_BROKERS });
}

/**
 * Creates the orders topic and its dead-letter topic (`<topic>.dlq`, once's default name).
 * @param {Kafka} kafka
 * @param {string} topic
 * @param {number} [partitions]
 */
export async function createTopics(kafka, topic, partitions = 3) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      topics: [
        { topic, numPartitions: partitions },
        { topic: `${topic}.dlq`, numPartitions: 1 },
      ],
      waitForLeaders: true,
    });
  } finally {
    await admin.disconnect();
  }
}

/**
 * @param {Kafka} kafka
 * @param {string} topic
 */
export async function deleteTopics(kafka, topic) {
  const admin = kafka.admin();
  await admin.connect();
  await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => {});
  await admin.disconnect();
}
