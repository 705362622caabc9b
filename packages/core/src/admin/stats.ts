import type { Queryable } from '../pg/pg-like.js';
import { sqlOf } from './admin-sql.js';

/** One consumer's inbox rows, by status. */
export interface ConsumerStats {
  /** The consumer name the rows are recorded under. */
  readonly consumer: string;
  /** Inbox rows of the consumer. */
  readonly rows: number;
  /** Rows processed (`done`). */
  readonly done: number;
  /** Rows recorded failed. */
  readonly failed: number;
  /** Leased by a lease-mode worker (schema version 3 on). */
  readonly inProgress: number;
  /** Past `expires_at`: what the next purge deletes. */
  readonly expired: number;
  /** When the oldest row was written; null without rows. */
  readonly oldestAt: Date | null;
  /** Age of the oldest row, in seconds, by the database's clock. */
  readonly oldestAgeSeconds: number | null;
}

/** One destination's outbox rows, by status. */
export interface DestinationStats {
  /** The outbox destination. */
  readonly destination: string;
  /** Rows waiting to be published. */
  readonly pending: number;
  /** Rows published and kept until `sentRetentionMs`. */
  readonly sent: number;
  /** Parked after `maxAttempts`, or refused as not retryable. */
  readonly failed: number;
  /** When the oldest pending row was written; null without any. */
  readonly oldestPendingAt: Date | null;
  /** Age of the oldest pending row, in seconds, by the database's clock. */
  readonly oldestPendingAgeSeconds: number | null;
}

/**
 * Inbox rows per consumer, ordered by consumer. Counts with `count(*)`, which reads the whole
 * inbox: for dashboards scraped often, use {@link readInboxGauges}.
 */
export async function inboxStats(db: Queryable, schema: string): Promise<ConsumerStats[]> {
  const rows = (
    await db.query<{
      consumer: string;
      total: number;
      done: number;
      failed: number;
      in_progress: number;
      expired: number;
      oldest_at: Date | null;
      oldest_age_s: number | null;
    }>(sqlOf(schema).inboxByConsumer)
  ).rows;
  return rows.map((r) => ({
    consumer: r.consumer,
    rows: r.total,
    done: r.done,
    failed: r.failed,
    inProgress: r.in_progress,
    expired: r.expired,
    oldestAt: r.oldest_at,
    oldestAgeSeconds: r.oldest_age_s,
  }));
}

/** Outbox rows per destination, ordered by destination (schema version 2 on). */
export async function outboxStats(db: Queryable, schema: string): Promise<DestinationStats[]> {
  const rows = (
    await db.query<{
      destination: string;
      pending: number;
      sent: number;
      failed: number;
      oldest_pending_at: Date | null;
      oldest_pending_age_s: number | null;
    }>(sqlOf(schema).outboxByDestination)
  ).rows;
  return rows.map((r) => ({
    destination: r.destination,
    pending: r.pending,
    sent: r.sent,
    failed: r.failed,
    oldestPendingAt: r.oldest_pending_at,
    oldestPendingAgeSeconds: r.oldest_pending_age_s,
  }));
}

/** Inbox rows past their expiry: what `purge` would delete now. */
export async function countExpired(db: Queryable, schema: string): Promise<number> {
  return (await db.query<{ n: number }>(sqlOf(schema).expiredCount)).rows[0]?.n ?? 0;
}
