import type { Queryable } from '../pg/pg-like.js';
import { sqlOf } from './admin-sql.js';

/** The inbox's gauges, read in one cheap statement. */
export interface InboxGauges {
  /**
   * The planner's row estimate (`pg_class.reltuples`). Before the table's first ANALYZE (or
   * vacuum) its rows counted, up to 10,000; null when it holds that many by then (unknown,
   * never a false 0), or when the table is missing.
   */
  readonly rowsEstimate: number | null;
  /** Age of the oldest expired row, in seconds (how far purging is behind); null when none. */
  readonly purgeLagSeconds: number | null;
}

/** The outbox's gauges, read in one cheap statement. */
export interface OutboxGauges {
  /** Pending rows, counted up to the limit given. */
  readonly pending: number;
  /** Age of the oldest pending row, in seconds; null when none. */
  readonly lagSeconds: number | null;
}

/**
 * Row estimate and purge lag of the inbox: a catalog read and one index probe, cheap enough for
 * every metrics collection (unlike {@link inboxStats}). Throws what PostgreSQL throws.
 */
export async function readInboxGauges(db: Queryable, schema: string): Promise<InboxGauges> {
  const sql = sqlOf(schema);
  const row = (
    await db.query<{ rows: number | null; purge_lag_s: number | null }>(sql.inboxGauges, [sql.inboxRegclass])
  ).rows[0];
  return { rowsEstimate: row?.rows ?? null, purgeLagSeconds: row?.purge_lag_s ?? null };
}

/**
 * Pending rows (counted up to `pendingLimit`, so a large backlog costs a bounded scan) and the
 * age of the oldest pending row. Throws what PostgreSQL throws.
 */
export async function readOutboxGauges(
  db: Queryable,
  schema: string,
  pendingLimit: number,
): Promise<OutboxGauges> {
  const row = (
    await db.query<{ pending: number; lag_s: number | null }>(sqlOf(schema).outboxGauges, [pendingLimit])
  ).rows[0];
  return { pending: row?.pending ?? 0, lagSeconds: row?.lag_s ?? null };
}
