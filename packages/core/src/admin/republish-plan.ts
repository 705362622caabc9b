import type { Origin } from '../envelope.js';
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

/** What a republish writes to the outbox. */
export interface RepublishPlan {
  readonly destination: string;
  readonly key: string | undefined;
  readonly body: Buffer;
  readonly headers: Record<string, string>;
}

/**
 * Headers that belong to one delivery, not to the message: never carried into a republish. NATS
 * `Nats-*` headers are JetStream's (the publish-side `Nats-Msg-Id` the publisher sets again, and
 * expectations such as `Nats-Expected-Last-Sequence` that would refuse a second publish).
 */
const DELIVERY_HEADER = /^(message-id$|x-once-|x-death$|x-delivery-count$|x-first-death-|nats-)/i;

/**
 * What a republish of a failed row writes, or an {@link AdminError} saying what is missing: a
 * stored body (`NO_BODY`), a whole one (`BODY_TRUNCATED`), a destination (`NO_DESTINATION`).
 * The message's own headers go with it; headers of the failed delivery do not.
 */
export function republishPlan(
  schema: string,
  key: MessageKey,
  row: { body: Buffer | null; bodyTruncated: boolean; origin: Partial<Origin> | null },
  options: RepublishOptions,
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
  return { destination, key: options.key ?? origin.key, body: row.body, headers };
}
