/**
 * `@once/kafka`: an effectively-once Kafka consumer (kafkajs) and an outbox publisher.
 *
 * ```ts
 * const consumer = createKafkaConsumer({ kafka, pool, groupId: 'billing', topics: ['orders'],
 *   handler: jsonHandler(async (order: Order, _e, { tx }) => { await tx.query(...) }) });
 * await consumer.start();
 * ```
 */
export { jsonHandler } from '@once/core/adapter';
export { KafkaErrorCode } from './errors.js';
export type {
  KafkaConsumerEventListener,
  KafkaConsumerEventMap,
  KafkaConsumerEventName,
  PartitionEventBase,
} from './events.js';
export {
  createKafkaConsumer,
  KafkaConsumer,
  type KafkaConsumerHealth,
  type KafkaConsumerState,
} from './kafka-consumer.js';
export type { KafkaLike } from './kafka-like.js';
export {
  createKafkaPublisher,
  KafkaPublisher,
  type KafkaPublisherOptions,
  type PublishMessage,
} from './kafka-publisher.js';
export {
  DEFAULT_KAFKA_CONSUMER_OPTIONS,
  type KafkaConsumerOptions,
  type KafkaIdSource,
  type ResolvedKafkaConsumerOptions,
} from './options.js';
