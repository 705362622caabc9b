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
import { ErrorCode, OnceError } from '@once/core';
import { Partitioners } from 'kafkajs';
import { type KafkajsInstance, kafkajsClient } from './client/kafkajs.js';
import type { KafkaClient, KafkaLike } from './client/types.js';

export type { KafkaLike } from './client/types.js';

/** Wraps a kafkajs `Kafka` instance (`new Kafka({ brokers })`) as the client of a once consumer or publisher. */
export function kafkajs(kafka: KafkajsInstance): KafkaClient {
  const k = kafka as Partial<KafkaLike> | null | undefined;
  if (
    typeof k?.consumer !== 'function' ||
    typeof k.producer !== 'function' ||
    typeof k.admin !== 'function'
  ) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      'kafkajs(kafka): kafka must be a kafkajs Kafka instance (new Kafka({ brokers }))',
    );
  }
  return kafkajsClient(kafka, Partitioners.DefaultPartitioner);
}
