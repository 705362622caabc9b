/**
 * Error codes raised by @once/kafka, beside core's (`INVALID_OPTION`, `CLOSED` for a consumer or
 * publisher that is not running, `ATTEMPTS_EXHAUSTED` for a message that keeps killing the process).
 */
export const KafkaErrorCode = {
  /** A broker could not be reached during `start()` (the message says which step). Retryable. */
  Unreachable: 'KAFKA_UNREACHABLE',
  /** A topic to consume does not exist at `start()`: create it first. */
  UnknownTopic: 'KAFKA_UNKNOWN_TOPIC',
} as const;
/** One of {@link KafkaErrorCode}'s values: the `code` of the errors this package throws. */
export type KafkaErrorCode = (typeof KafkaErrorCode)[keyof typeof KafkaErrorCode];
