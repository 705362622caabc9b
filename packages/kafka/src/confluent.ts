/**
 * `@once/kafka/confluent`: the `@confluentinc/kafka-javascript` client of `@once/kafka`, through
 * its KafkaJS-compatible API. The library is an optional peer that `npm ci` does not build here
 * (see scripts/confluent-install); this entry does not load it: pass your own instance.
 *
 * ```ts
 * import { KafkaJS } from '@confluentinc/kafka-javascript';
 * import { confluent } from '@once/kafka/confluent';
 * createKafkaConsumer({
 *   kafka: confluent(new KafkaJS.Kafka({ kafkaJS: { brokers } }), {
 *     consumer: { 'group.protocol': 'consumer' }, // KIP-848 (Kafka 4)
 *   }),
 *   ...
 * });
 * ```
 */
import { ErrorCode, OnceError } from '@once/core';
import { type ConfluentDefaults, type ConfluentKafkaLike, confluentClient } from './client/confluent.js';
import type { KafkaClient } from './client/types.js';

export type { ConfluentConfig, ConfluentDefaults, ConfluentKafkaLike } from './client/confluent.js';

/**
 * Wraps a Confluent `KafkaJS.Kafka` instance (`new KafkaJS.Kafka({ kafkaJS: { brokers } })`) as the
 * client of a once consumer or publisher. `defaults.consumer`: consumer settings merged under
 * once's own and each consumer's `consumerConfig` (librdkafka properties and a `kafkaJS` block).
 */
export function confluent(kafka: ConfluentKafkaLike, defaults?: ConfluentDefaults): KafkaClient {
  const k = kafka as Partial<ConfluentKafkaLike> | null | undefined;
  if (
    typeof k?.consumer !== 'function' ||
    typeof k.producer !== 'function' ||
    typeof k.admin !== 'function'
  ) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      'confluent(kafka): kafka must be a KafkaJS.Kafka instance of @confluentinc/kafka-javascript (new KafkaJS.Kafka({ kafkaJS: { brokers } }))',
    );
  }
  if (
    defaults !== undefined &&
    (typeof defaults !== 'object' || defaults === null || Array.isArray(defaults))
  ) {
    throw new OnceError(ErrorCode.InvalidOption, 'confluent(kafka, defaults): defaults must be an object');
  }
  const consumer = defaults?.consumer;
  if (
    consumer !== undefined &&
    (typeof consumer !== 'object' || consumer === null || Array.isArray(consumer))
  ) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      "confluent(kafka, defaults): defaults.consumer must be an object of consumer settings (e.g. { 'group.protocol': 'consumer' })",
    );
  }
  const kafkaJS = consumer?.kafkaJS;
  if (kafkaJS !== undefined && (typeof kafkaJS !== 'object' || kafkaJS === null || Array.isArray(kafkaJS))) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      'confluent(kafka, defaults): defaults.consumer.kafkaJS must be an object',
    );
  }
  return confluentClient(kafka, defaults);
}
