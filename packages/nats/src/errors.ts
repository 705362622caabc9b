import { OnceError } from '@once/core';

/**
 * Error codes raised by @once/nats, beside core's (`INVALID_OPTION`, `CLOSED` for a consumer or
 * publisher that is not running, `ATTEMPTS_EXHAUSTED` for a message that keeps killing the
 * process).
 */
export const NatsErrorCode = {
  /** The server could not be reached. Retryable. */
  Connect: 'NATS_CONNECT',
  /** The server is older than the oldest once supports (2.9.0), or has JetStream off. */
  Server: 'NATS_SERVER',
  /** No stream captures the subject (the consumed one, or the dead-letter subject). */
  StreamNotFound: 'NATS_STREAM_NOT_FOUND',
  /** The durable consumer does not exist and `createConsumer` is off. */
  ConsumerNotFound: 'NATS_CONSUMER_NOT_FOUND',
  /**
   * The durable consumer's configuration would break the guarantee: an ack policy other than
   * explicit, `max_deliver` other than −1, `ack_wait` not above `handlerTimeoutMs`, a push
   * consumer, another filter subject, or a dead-letter subject the consumer itself receives.
   */
  ConsumerConfig: 'NATS_CONSUMER_CONFIG',
  /** A user-supplied connection was closed: the consumer cannot fetch or settle any more. */
  ConnectionClosed: 'NATS_CONNECTION_CLOSED',
  /** A JetStream publish got no PubAck (timeout, no stream, the connection went). Retryable. */
  Publish: 'NATS_PUBLISH',
  /**
   * With `idFrom: 'sequence'`: the record of which stream generation keeps bare sequence ids (an
   * inbox row of the consumer) could not be read or made. Fetching waits and tries again.
   */
  SequenceIds: 'NATS_SEQUENCE_IDS',
  /**
   * A republished message was taken for a duplicate: the stream still holds its `Nats-Msg-Id`
   * inside its `duplicate_window`. The relay holds the row until the window has passed.
   */
  DuplicateWindow: 'NATS_DUPLICATE_WINDOW',
} as const;
/** One of {@link NatsErrorCode}'s values: the `code` of the errors this package throws. */
export type NatsErrorCode = (typeof NatsErrorCode)[keyof typeof NatsErrorCode];

/** Maps a failed connect to a named, retryable OnceError. */
export function connectError(err: unknown, servers: readonly string[]): OnceError {
  if (OnceError.is(err)) return err;
  const message = (err as Error)?.message ?? String(err);
  return new OnceError(NatsErrorCode.Connect, `cannot connect to NATS at ${servers.join(', ')}: ${message}`, {
    retryable: true,
    cause: err,
  });
}
