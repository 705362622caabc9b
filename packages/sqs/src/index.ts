export { jsonHandler } from '@once/core/adapter';
export { createSqsConsumer, SqsConsumer, type SqsConsumerHealth, type SqsConsumerState } from './consumer.js';
export { readDeadLetter } from './dead-letter.js';
export { SqsErrorCode } from './errors.js';
export type { SqsConsumerEventListener, SqsConsumerEventMap, SqsConsumerEventName } from './events.js';
export {
  DEFAULT_SQS_CONSUMER_OPTIONS,
  type ResolvedSqsConsumerOptions,
  type SqsConsumerOptions,
  type SqsIdSource,
} from './options.js';
export {
  createSqsPublisher,
  type PublishMessage,
  type PublishResult,
  type SqsPublisher,
  type SqsPublisherOptions,
} from './publisher.js';
export type { QueueInfo } from './queue-info.js';
export { BODY_ENCODING_ATTRIBUTE } from './sqs-body.js';
