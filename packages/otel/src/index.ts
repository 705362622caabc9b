export { Attr, destinationOf, systemOf } from './attributes.js';
export { type Headers, headerGetter } from './header-getter.js';
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
  RabbitConsumerLike,
  RabbitSettledEvent,
  RelayLike,
  SqsConsumerLike,
  SqsDeadLetterEvent,
} from './targets.js';
export { type ContextExtractor, type TracedOptions, traced } from './traced.js';
