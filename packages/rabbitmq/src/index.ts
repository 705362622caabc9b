/**
 * `@once/rabbitmq`: an effectively-once RabbitMQ consumer (amqplib) and an outbox publisher with
 * publisher confirms.
 *
 * ```ts
 * const consumer = createRabbitConsumer({ url: 'amqp://localhost', queue: 'emails', pool,
 *   handler: jsonHandler(async (email: Email, _e, { tx }) => { await tx.query(...) }) });
 * await consumer.start();
 * ```
 */
export { jsonHandler } from '@once/core/adapter';
export {
  createRabbitConsumer,
  RabbitConsumer,
  type RabbitConsumerHealth,
  type RabbitConsumerState,
} from './consumer.js';
export { RabbitErrorCode } from './errors.js';
export type {
  RabbitConsumerEventListener,
  RabbitConsumerEventMap,
  RabbitConsumerEventName,
  RabbitSettlePlan,
} from './events.js';
export { Header } from './headers.js';
export {
  DEFAULT_RABBIT_CONSUMER_OPTIONS,
  type QueueType,
  type RabbitConsumerOptions,
  type ResolvedRabbitConsumerOptions,
} from './options.js';
export {
  createRabbitPublisher,
  type OutboxMessage,
  RabbitPublisher,
  type RabbitPublisherOptions,
} from './publisher.js';
export type { SocketOptionsLike } from './socket-options.js';
