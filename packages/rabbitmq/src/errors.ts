import { OnceError } from '@once/core';

/**
 * Error codes raised by @once/rabbitmq, beside core's (`INVALID_OPTION`, `CLOSED` for a consumer
 * or publisher that is not running, `ATTEMPTS_EXHAUSTED` for a message that keeps killing the
 * process).
 */
export const RabbitErrorCode = {
  /** The broker could not be reached or refused the login. Retryable. */
  Connect: 'AMQP_CONNECT',
  /** The queue to consume does not exist (and `assertQueue` is off). */
  QueueNotFound: 'AMQP_QUEUE_NOT_FOUND',
  /** Declaring the topology failed, e.g. a queue exists with other arguments (406). */
  Topology: 'AMQP_TOPOLOGY',
  /** A `mandatory` publish matched no queue; the broker returned it. */
  Unroutable: 'AMQP_UNROUTABLE',
  /** The broker nacked a publish (it could not take responsibility for it). Retryable. */
  Nacked: 'AMQP_NACKED',
  /** The channel closed before the broker confirmed a publish: it may or may not have landed. Retryable. */
  ChannelClosed: 'AMQP_CHANNEL_CLOSED',
  /**
   * The message id is longer than an AMQP `message-id` can hold (a shortstr: 255 bytes of
   * UTF-8), though once ids may have up to 512 characters. Not retryable: the relay parks the row.
   */
  IdTooLong: 'AMQP_ID_TOO_LONG',
  /** The routing key is longer than AMQP allows (a shortstr: 255 bytes of UTF-8). Not retryable. */
  KeyTooLong: 'AMQP_KEY_TOO_LONG',
  /**
   * No confirm came within `confirmTimeoutMs` (or the caller's signal was aborted): the channel
   * is closed, so a late confirm counts for nothing. The message may have landed. Retryable.
   */
  ConfirmTimeout: 'AMQP_CONFIRM_TIMEOUT',
} as const;
/** One of {@link RabbitErrorCode}'s values: the `code` of the errors this package throws. */
export type RabbitErrorCode = (typeof RabbitErrorCode)[keyof typeof RabbitErrorCode];

/** Maps an amqplib failure at connect/declare time to a named, actionable OnceError. */
export function setupError(err: unknown, queue: string): OnceError {
  if (OnceError.is(err)) return err;
  const e = err as { code?: unknown; message?: string };
  const message = e?.message ?? String(err);
  if (e?.code === 404 && message.includes(`queue '${queue}'`)) {
    return new OnceError(
      RabbitErrorCode.QueueNotFound,
      `queue '${queue}' does not exist: declare it, or let the consumer declare it (assertQueue: true)`,
      { cause: err },
    );
  }
  if (typeof e?.code === 'number') {
    // Channel-level AMQP replies: 403 access refused, 404 not found, 406 precondition failed...
    const hint = queueTypeHint(message);
    return new OnceError(
      RabbitErrorCode.Topology,
      `declaring the topology of queue '${queue}' failed: ${message}${hint === undefined ? '' : `. ${hint}`}`,
      {
        cause: err,
      },
    );
  }
  return new OnceError(RabbitErrorCode.Connect, `cannot connect to RabbitMQ: ${message}`, {
    retryable: true,
    cause: err,
  });
}

/**
 * For RabbitMQ's 406 on a queue that exists with another `x-queue-type` ("inequivalent arg
 * 'x-queue-type' for queue 'q' …: received the value 'quorum' … but current is none", or
 * "… received 'classic' but current is 'quorum'", as RabbitMQ versions word it): which
 * `queueType` matches the queue that exists. A queue declared without the argument ("current is
 * none") is a classic queue. Undefined for any other refusal.
 */
export function queueTypeHint(message: string): string | undefined {
  const m =
    /inequivalent arg 'x-queue-type' for queue '((?:[^']|'')*)'.*but current is (?:none|(?:the value )?'([a-z]+)')/s.exec(
      message,
    );
  if (!m) return undefined;
  const existing = m[2] ?? 'classic';
  const option =
    existing === 'classic' || existing === 'quorum'
      ? `pass queueType: '${existing}' to consume it as it is`
      : 'once consumes quorum and classic queues only';
  return (
    `queue '${m[1]}' exists as a ${existing} queue, and a queue's type cannot change: ${option}, ` +
    'or delete the queue (its messages with it) and let the consumer declare it'
  );
}
