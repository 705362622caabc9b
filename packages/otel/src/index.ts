/**
 * `@once/otel`: OpenTelemetry for once. `instrument` subscribes to an inbox, an adapter consumer
 * or an outbox relay and records the metrics a dashboard needs (outcomes, dead letters,
 * durations, inbox size, purge lag, outbox backlog); `traced` runs a handler in a `CONSUMER` span
 * whose parent is the trace context the message carries.
 *
 * ```ts
 * const consumer = createKafkaConsumer({ kafka, pool, groupId: 'billing', topics: ['orders'],
 *   handler: traced(async (message, { tx }) => { await saveOrder(tx, message) }) });
 * const instrumentation = instrument(consumer, { pool });
 * ```
 */
export { Attr } from './attributes.js';
export { type Instrumentation, instrument } from './instrument.js';
export { DEFAULT_INSTRUMENT_OPTIONS, type InstrumentOptions } from './instrument-options.js';
export { DURATION_BUCKETS_S, MetricName, SEMCONV_VERSION } from './instruments.js';
export { SCOPE_NAME } from './scope.js';
export type {
  ConsumerLike,
  InboxLike,
  InstrumentTarget,
  KafkaConsumerLike,
  KafkaDeadLetteredEvent,
  NatsConsumerLike,
  NatsDeadLetteredEvent,
  RabbitConsumerLike,
  RabbitDeadLetteredEvent,
  RabbitSettledEvent,
  RelayLike,
  SqsConsumerLike,
  SqsDeadLetterEvent,
} from './targets.js';
export { type ContextExtractor, type TracedOptions, traced } from './traced.js';
