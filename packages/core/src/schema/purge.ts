import { checkNumber } from '../option-check.js';
import { boundPool, resolvePoolBounds } from '../pg/bounded-pool.js';
import type { PgPoolLike } from '../pg/pg-like.js';
import { sleep } from '../sleep.js';
import { quoteIdentifier } from '../sql/identifier.js';
import { inboxSql } from '../sql/inbox.js';
import { checkSchema } from './check-schema.js';

/** Options of {@link purge}. */
export interface PurgeOptions {
  /** @default 'once' */
  schema?: string;
  /**
   * Rows deleted per statement. Each statement holds its rows' locks until it commits (expired
   * rows, which consumers rarely touch); fewer, larger statements disturbed paced consumers' p99
   * less than 1,000-row ones on the bench (docs/history/benchmarks-issue-14.md, "Scale"). @default 5000
   */
  batchSize?: number;
  /** Stop after this many rows (for a bounded maintenance window). @default no limit */
  maxRows?: number;
  /** Pause between batches, in ms, to leave room for consumers. @default 0 */
  pauseMs?: number;
  /**
   * The most rows deleted per second, averaged from the start of the run: after each batch the
   * purge waits until its total is within this rate (on top of `pauseMs`). Pick it from the
   * backlog and the window, e.g. 10 million rows in 30 minutes is about 5,600 rows/s.
   * @default no limit
   */
  rowsPerSecond?: number;
  /** Called after each batch with the running total. */
  onProgress?: (deleted: number) => void;
  /** Stops between batches when aborted. */
  signal?: AbortSignal;
  /**
   * The longest purge() waits for the reply to one statement (a batch's DELETE, the schema
   * check), in ms; past it `StatementTimeoutError`, the connection destroyed. @default 30000
   */
  statementTimeoutMs?: number;
  /** The longest purge() waits for a pool connection, in ms. @default 10000 */
  connectTimeoutMs?: number;
}

/**
 * Deletes expired inbox rows, then expired start counts, in small batches through their expiry
 * indexes, never in one long DELETE, each batch's index scan starting where the last one ended;
 * each batch commits without waiting for its WAL flush (it settles nothing, and a batch lost in a
 * crash is deleted by the next run). Rows another purger (or a consumer) has locked are skipped, so purgers can overlap.
 * Checks the schema first, as an inbox does: a schema that is not installed, behind this build,
 * or past a contract migration that removed what this build's purge relies on (for example a
 * purge built before version 9, which would leave the deleted rows' steps behind) is refused
 * with the same error, and nothing is deleted. Returns the number of rows deleted.
 */
export async function purge(pool: PgPoolLike, options: PurgeOptions = {}): Promise<number> {
  return purgeOn(boundPool(pool, resolvePoolBounds(options)), options);
}

async function purgeOn(pool: PgPoolLike, options: PurgeOptions): Promise<number> {
  const schema = options.schema ?? 'once';
  const sql = inboxSql(quoteIdentifier(schema, "option 'schema'"));
  const batchSize = checkNumber('batchSize', options.batchSize ?? 5000, 1);
  const maxRows =
    options.maxRows === undefined ? Number.POSITIVE_INFINITY : checkNumber('maxRows', options.maxRows, 0);
  const pauseMs = checkNumber('pauseMs', options.pauseMs ?? 0, 0);
  const rowsPerSecond =
    options.rowsPerSecond === undefined
      ? Number.POSITIVE_INFINITY
      : checkNumber('rowsPerSecond', options.rowsPerSecond, 1, false);
  await checkSchema(pool, schema);
  const started = performance.now();
  let deleted = 0;
  // Inbox rows, then expired start counts (Inbox.noteStart), each in small batches.
  for (const step of [sql.purgeStep, sql.purgeStartsStep]) {
    let fromUs: number | undefined;
    while (deleted < maxRows && !options.signal?.aborted) {
      const n = Math.min(batchSize, maxRows - deleted);
      const row = (await pool.query<{ n: number; last_us: string | null }>(step(n, fromUs))).rows[0];
      const count = row?.n ?? 0;
      if (row?.last_us) fromUs = Number(row.last_us);
      deleted += count;
      if (count > 0) options.onProgress?.(deleted);
      if (count < n) break;
      // The pause, or longer if the run is ahead of rowsPerSecond.
      const wait = Math.max(pauseMs, (deleted / rowsPerSecond) * 1000 - (performance.now() - started));
      if (wait > 0) await sleep(wait, options.signal);
    }
  }
  return deleted;
}
