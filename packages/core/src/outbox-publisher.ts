import type { SerializedError } from './errors.js';

/** One outbox row as the relay hands it to a broker publisher. */
export interface OutboxMessage {
  /** The outbox row id (a UUID): publishers send it as the message id consumers deduplicate on. */
  id: string;
  destination: string;
  /** Partition key, SQS message group, AMQP routing key. */
  key: string | undefined;
  body: Buffer;
  headers: Readonly<Record<string, string>>;
}

/** The broker's verdict on one message. */
export type OutboxPublishResult =
  | { id: string; ok: true }
  | { id: string; ok: false; error: SerializedError | Error; retryable?: boolean };

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
  publish(
    messages: readonly OutboxMessage[],
    options?: OutboxPublishOptions,
    // biome-ignore lint/suspicious/noConfusingVoidType: a publisher that confirms all-or-nothing returns nothing
  ): Promise<readonly OutboxPublishResult[] | void>;
}
