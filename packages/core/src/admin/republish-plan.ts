import type { Origin } from '../message/envelope.js';
import { AdminError, AdminErrorCode } from './admin-error.js';
import type { MessageKey } from './admin-sql.js';

/** Where `retryFailed` republishes a failed message. */
export interface RepublishOptions {
  /**
   * The outbox destination. @default the source the message came from, when that is a place to
   * publish to: its Kafka topic, SQS queue URL or NATS subject (a RabbitMQ queue is not an exchange)
   */
  readonly destination?: string | undefined;
  /** The key (partition key, message group, routing key). @default the key it came with */
  readonly key?: string | undefined;
}

/**
 * How a republished message gets past its broker's deduplication of the id, which would drop the
 * copy inside its window (the original went out under the same id). Every republished row is
 * marked as such; what the mark does depends on the broker it goes to.
 */
export const RepublishDedup = {
  /**
   * JetStream (it came from NATS): sent under its own id, the `Nats-Msg-Id` its consumer reads. If
   * JetStream answers that it already holds that id, the row stays pending until the stream's
   * `duplicate_window` has passed, and goes again then.
   */
  WaitForWindow: 'wait-for-window',
  /**
   * An SQS FIFO queue whose consumer reads the `message-id` attribute: sent with a fresh
   * MessageDeduplicationId, the message's id in `message-id`.
   */
  FreshDeduplicationId: 'fresh-deduplication-id',
  /**
   * An SQS FIFO queue whose consumer takes ids from the MessageDeduplicationId (or where that was
   * not recorded): sent under its own id, the five minutes in which SQS drops it having passed.
   * Inside them the republish is refused (`INSIDE_DEDUP_WINDOW`, naming the earliest time).
   */
  WindowPassed: 'window-passed',
  /** A broker that does not deduplicate on the id (Kafka, RabbitMQ, SQS standard queues): sent as is. */
  None: 'none',
  /**
   * Another destination than the one it came from: marked, so that a broker that deduplicates on
   * the id holds it (JetStream) or gives it a fresh deduplication id (SQS FIFO).
   */
  Marked: 'marked',
} as const;
/** One of {@link (RepublishDedup:variable)}'s values. */
export type RepublishDedup = (typeof RepublishDedup)[keyof typeof RepublishDedup];

/** How long SQS FIFO drops a MessageDeduplicationId it has seen, in ms: five minutes. */
export const SQS_FIFO_DEDUP_INTERVAL_MS = 300_000;

/** What a republish writes to the outbox. */
export interface RepublishPlan {
  /** The outbox destination. */
  readonly destination: string;
  readonly key: string | undefined;
  readonly body: Buffer;
  readonly headers: Record<string, string>;
  /** How it gets past the broker's deduplication of its id. */
  readonly dedup: RepublishDedup;
  /**
   * The broker-level deduplication id the row is marked with (`OutboxMessage.republish`): the
   * message id itself for {@link RepublishDedup.WindowPassed}, else `freshId`.
   */
  readonly deduplicationId: string;
}

/** The failed row a republish starts from. */
export interface RepublishSource {
  readonly body: Buffer | null;
  /** True when the stored body was cut at `failedBodyMaxBytes`. */
  readonly bodyTruncated: boolean;
  readonly origin: Partial<Origin> | null;
  /** When the failure was recorded, by the database's clock. */
  readonly failedAt: Date;
  /** The database's clock now. */
  readonly now: Date;
}

/**
 * Headers that belong to one delivery, not to the message: never carried into a republish. NATS
 * `Nats-*` headers are JetStream's (the publish-side `Nats-Msg-Id` the publisher sets again, and
 * expectations such as `Nats-Expected-Last-Sequence` that would refuse a second publish).
 */
const DELIVERY_HEADER = /^(message-id$|x-once-|x-death$|x-delivery-count$|x-first-death-|nats-)/i;

/**
 * What a republish of a failed row writes, or an {@link AdminError} saying what is missing: a
 * stored body (`NO_BODY`), a whole one (`BODY_TRUNCATED`), a destination (`NO_DESTINATION`), or
 * time (`INSIDE_DEDUP_WINDOW`: its SQS FIFO consumer reads the deduplication id, which SQS still
 * drops). The message's own headers go with it; headers of the failed delivery do not.
 * `freshId` is a new unique id, the row's broker-level deduplication id where one of its own is
 * wanted.
 */
export function republishPlan(
  schema: string,
  key: MessageKey,
  row: RepublishSource,
  options: RepublishOptions,
  freshId: string,
): RepublishPlan {
  if (row.body === null) throw new AdminError(schema, { code: AdminErrorCode.NoBody, ...key });
  if (row.bodyTruncated) {
    throw new AdminError(schema, {
      code: AdminErrorCode.BodyTruncated,
      ...key,
      bodyBytes: row.body.length,
    });
  }
  const origin = row.origin ?? {};
  const fromSource =
    origin.broker === 'kafka' || origin.broker === 'sqs' || origin.broker === 'nats'
      ? origin.queue
      : undefined;
  const destination = options.destination ?? fromSource;
  if (destination === undefined) {
    throw new AdminError(schema, { code: AdminErrorCode.NoDestination, ...key, origin: row.origin });
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(origin.headers ?? {}))
    if (!DELIVERY_HEADER.test(name) && typeof value === 'string') headers[name] = value;
  const dedup = dedupOf(schema, key, row, destination);
  const deduplicationId = dedup === RepublishDedup.WindowPassed ? key.messageId : freshId;
  return { destination, key: options.key ?? origin.key, body: row.body, headers, dedup, deduplicationId };
}

/**
 * How the republish gets past the deduplication of the broker it came from. Decided by where it
 * came from only when it goes back there: the consumer that failed it is the one that reads it.
 */
function dedupOf(schema: string, key: MessageKey, row: RepublishSource, destination: string): RepublishDedup {
  const origin = row.origin ?? {};
  if (origin.queue === undefined || destination !== origin.queue) return RepublishDedup.Marked;
  if (origin.broker === 'nats') return RepublishDedup.WaitForWindow;
  if (origin.broker !== 'sqs' || !origin.queue.endsWith('.fifo')) return RepublishDedup.None;
  if (origin.idFrom === 'header' || origin.idFrom === 'sqs-message-id') {
    return RepublishDedup.FreshDeduplicationId;
  }
  // The consumer takes ids from the MessageDeduplicationId (or it was not recorded, before schema
  // version 10): a fresh one would be a new message to it, which would run again should the
  // original come back. So it goes under its own, once SQS no longer drops that: five minutes
  // after the original was sent, which was before its failure was recorded.
  const earliestAt = new Date(row.failedAt.getTime() + SQS_FIFO_DEDUP_INTERVAL_MS);
  if (row.now.getTime() < earliestAt.getTime()) {
    throw new AdminError(schema, {
      code: AdminErrorCode.InsideDedupWindow,
      ...key,
      queue: origin.queue,
      earliestAt,
    });
  }
  return RepublishDedup.WindowPassed;
}
