/**
 * `@once/kafka`: an effectively-once Kafka consumer and an outbox publisher, over a Kafka client
 * library behind a seam (kafkajs: `import { kafkajs } from '@once/kafka/kafkajs'`).
 *
 * ```ts
 * const consumer = createKafkaConsumer({ kafka: kafkajs(new Kafka({ brokers })), pool, groupId: 'billing', topics: ['orders'],
 *   handler: jsonHandler(async (order: Order, _e, { tx }) => { await tx.query(...) }) });
 * await consumer.start();
 * ```
 */
export { jsonHandler } from '@once/core/adapter';
export {
  type ClientAdmin,
  type ClientCrash,
  type ClientHeaders,
  type ClientMessage,
  type ClientProducer,
  type GroupConsumer,
  type GroupConsumerConfig,
  type GroupJoin,
  isKafkaClient,
  KAFKA_CLIENT,
  type KafkaClient,
  type KafkaClientCapabilities,
  type KafkaLike,
  type OutgoingMessage,
  type PartitionBatch,
} from './client/types.js';
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
