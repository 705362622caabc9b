export { type AckKind, type AckTarget, AckWatermark } from './ack-watermark.js';
export { ConfirmedPublisher } from './confirmed-publish.js';
export {
  type ConsumerHealth,
  type ConsumerState,
  createRabbitConsumer,
  RabbitConsumer,
} from './consumer.js';
export { envelopeOf } from './envelope-of.js';
export { RabbitErrorCode } from './errors.js';
export type { RabbitEventListener, RabbitEventMap, RabbitEventName } from './events.js';
export { Header } from './headers.js';
export { jsonHandler } from './json-handler.js';
export {
  DEFAULT_RABBIT_OPTIONS,
  type QueueType,
  type RabbitConsumerOptions,
  type ResolvedRabbitOptions,
  resolveRabbitOptions,
} from './options.js';
export {
  createRabbitPublisher,
  type OutboxMessage,
  RabbitPublisher,
  type RabbitPublisherOptions,
} from './publisher.js';
export type { SocketOptionsLike } from './socket-options.js';
export { type Topology, tierFor, topologyOf } from './topology.js';
