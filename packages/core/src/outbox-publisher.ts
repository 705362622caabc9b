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

/**
 * What the relay needs from a broker publisher. `publish` resolves once the broker confirmed
 * the messages; it may return one result per message (partial success), or nothing, meaning all
 * were confirmed. A rejection means none is known to be published.
 */
export interface OutboxPublisher {
  // biome-ignore lint/suspicious/noConfusingVoidType: a publisher that confirms all-or-nothing returns nothing
  publish(messages: readonly OutboxMessage[]): Promise<readonly OutboxPublishResult[] | void>;
}
