export { createSqsConsumer, SqsConsumer, type SqsConsumerHealth, type SqsConsumerState } from './consumer.js';
export { readDeadLetter } from './dead-letter.js';
export type { SqsEventListener, SqsEventMap, SqsEventName } from './events.js';
export { jsonHandler } from './json-handler.js';
export {
  DEFAULT_SQS_CONSUMER_OPTIONS,
  type DeadLetter,
  type IdSource,
  type ResolvedSqsConsumerOptions,
  type SqsConsumerOptions,
} from './options.js';
export {
  BODY_ENCODING_ATTRIBUTE,
  createSqsPublisher,
  type PublishMessage,
  type PublishResult,
  type SqsPublisher,
  type SqsPublisherOptions,
} from './publisher.js';
export { type QueueInfo, SqsErrorCode } from './queue-info.js';
