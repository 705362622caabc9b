export { type DeadLetterOutcome, deadLetterMessage } from './dead-letter.js';
export { type EnvelopeContext, envelopeOf, type MappedMessage } from './envelope-of.js';
export type { KafkaConsumerEventListener, KafkaConsumerEventMap, KafkaConsumerEventName } from './events.js';
export { KAFKA_FENCE_MISMATCH } from './fence-check.js';
export {
  CONSUMER_KILLED,
  createKafkaConsumer,
  KafkaConsumer,
  type KafkaConsumerHealth,
  type KafkaConsumerStatus,
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
  type ProcessingMode,
  type ResolvedKafkaConsumerOptions,
  resolveKafkaConsumerOptions,
} from './options.js';
export { decodeMarker, encodeMarker, type ReplayMarker } from './replay-marker.js';
