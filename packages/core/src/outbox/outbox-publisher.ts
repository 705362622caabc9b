import type { SerializedError } from '../errors.js';

/** One outbox row as the relay hands it to a broker publisher. */
export interface OutboxMessage {
  /** The outbox row id (a UUID): publishers send it as the message id consumers deduplicate on. */
  id: string;
  /** The destination name given to `createOutbox` (a topic, queue or subject, as the publisher maps it). */
  destination: string;
  /** Partition key, SQS message group, AMQP routing key. */
  key: string | undefined;
  /** The message's bytes. */
  body: Buffer;
  /** Headers to send with it, `message-id` among them. */
  headers: Readonly<Record<string, string>>;
  /**
   * Set when the row republishes a message already sent under this id (`retryFailed` with
   * `republish`, `once failed retry --republish`). A broker that deduplicates on the id inside a
   * window drops such a copy there, so its "duplicate" answer is no delivery: JetStream's
   * (`Nats-Msg-Id`) is reported with `retryAfterMs`, the end of the stream's `duplicate_window`;
   * SQS FIFO sends it with `deduplicationId` as the MessageDeduplicationId (the id stays in the
   * `message-id` attribute). Brokers that do not deduplicate on the id (Kafka, RabbitMQ, SQS
   * standard queues) send it as any other. @default not a republish
   */
  republish?: OutboxRepublish | undefined;
}

/** What {@link OutboxMessage.republish} carries. */
export interface OutboxRepublish {
  /**
   * The broker-level deduplication id to send it with where the broker keeps one apart from the
   * message id (SQS FIFO): a fresh one of its own, or the message id itself when the consumer takes
   * ids from the deduplication id (the original's window having passed when it was enqueued).
   */
  readonly deduplicationId: string;
}

/** The broker's verdict on one message. */
export type OutboxPublishResult =
  | {
      /** The id of the message this result is about. */
      id: string;
      /** The broker confirmed it: the relay marks the row sent. */
      ok: true;
    }
  | {
      /** The id of the message this result is about. */
      id: string;
      /** The broker did not confirm it: the row stays pending, or is parked. */
      ok: false;
      /** Why the broker did not take it; stored on the row and shown when the row is parked. */
      error: SerializedError | Error;
      /**
       * False when sending again cannot help (a message the broker refuses): the relay parks the row at once.
       * @default true, retried until the relay's `maxAttempts`
       */
      retryable?: boolean;
      /**
       * The broker cannot take the message before this many ms from now (a republish inside the
       * broker's deduplication window): the row stays pending until then, and this is no failed
       * attempt (not counted toward `maxAttempts`, never parked). @default a failed attempt,
       * retried after `retryDelayMs`
       */
      retryAfterMs?: number;
    };

/** What the relay passes to {@link OutboxPublisher.publish} besides the messages. */
export interface OutboxPublishOptions {
  /**
   * Aborted when the relay's deadline (`publishTimeoutMs`) passes, or the publisher should give
   * up for another reason. A publisher should then stop waiting for the broker and settle soon,
   * and make sure nothing it sent before the abort is taken for confirmed (close the channel,
   * drop the producer, abort the request). The relay no longer looks at the call's result: the
   * rows stay pending, their attempts unchanged, and are published again under the same id.
   */
  signal?: AbortSignal | undefined;
}

/**
 * What the relay needs from a broker publisher. `publish` resolves once the broker confirmed
 * the messages; it may return one result per message (partial success), or nothing, meaning all
 * were confirmed. A rejection means none is known to be published. A result with
 * `retryable: false` parks its row at once (a message the broker can never carry).
 */
export interface OutboxPublisher {
  /** Sends `messages` and resolves when the broker confirmed them (see above for the results). */
  publish(
    messages: readonly OutboxMessage[],
    options?: OutboxPublishOptions,
    // biome-ignore lint/suspicious/noConfusingVoidType: a publisher that confirms all-or-nothing returns nothing
  ): Promise<readonly OutboxPublishResult[] | void>;
}
