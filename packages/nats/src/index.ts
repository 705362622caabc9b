/**
 * `@once/nats`: an effectively-once NATS JetStream consumer (a durable pull consumer with explicit
 * acks, on `@nats-io/jetstream`) and an outbox publisher that waits for each PubAck. Supports
 * nats-server 2.9.0 and later.
 *
 * ```ts
 * const consumer = createNatsConsumer({ servers: 'nats://127.0.0.1:4222', subject: 'orders.>', pool,
 *   handler: jsonHandler(async (order: Order, _e, { tx }) => { await tx.query(...) }) });
 * await consumer.start();
 * ```
 */
export { jsonHandler } from '@once/core/adapter';
export {
  createNatsConsumer,
  NatsConsumer,
  type NatsConsumerHealth,
  type NatsConsumerState,
} from './consumer.js';
export { NatsErrorCode } from './errors.js';
export type { NatsConsumerEventListener, NatsConsumerEventMap, NatsConsumerEventName } from './events.js';
export {
  DEFAULT_NATS_CONSUMER_OPTIONS,
  type NatsConsumerOptions,
  type NatsIdFrom,
  type ResolvedNatsConsumerOptions,
} from './options.js';
export { createNatsPublisher, NatsPublisher, type NatsPublisherOptions } from './publisher.js';
export { ORIGIN_SUBJECT_HEADER, ORIGINAL_ID_HEADER } from './settle.js';
export { MIN_SERVER_VERSION } from './setup.js';
