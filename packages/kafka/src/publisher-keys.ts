/**
 * The keys of `KafkaPublisherOptions`: `createKafkaPublisher` refuses any other. Its use checks
 * (`satisfies`) that the list names every key of the options.
 */
export const KAFKA_PUBLISHER_KEYS = Object.freeze({
  kafka: true,
  idHeader: true,
  ackTimeoutMs: true,
  producerConfig: true,
} as const);
