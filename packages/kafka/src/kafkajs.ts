/**
 * `@once/kafka/kafkajs`: the kafkajs client of `@once/kafka`. Import it only where kafkajs is
 * installed (an optional peer).
 *
 * ```ts
 * import { Kafka } from 'kafkajs';
 * import { kafkajs } from '@once/kafka/kafkajs';
 * createKafkaConsumer({ kafka: kafkajs(new Kafka({ brokers })), ... });
 * ```
 */
import { Partitioners } from 'kafkajs';
import { type KafkaLike, kafkajsClient } from './client/kafkajs.js';
import type { KafkaClient } from './client/types.js';

export type { KafkaLike } from './client/kafkajs.js';

/** Wraps a kafkajs `Kafka` instance (`new Kafka({ brokers })`) as the client of a once consumer or publisher. */
export function kafkajs(kafka: KafkaLike): KafkaClient {
  return kafkajsClient(kafka, Partitioners.DefaultPartitioner);
}
