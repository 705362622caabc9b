import { ErrorCode, OnceError } from '../errors.js';
import { MAX_ID_LENGTH } from '../message/envelope.js';
import type { Queryable } from '../pg/pg-like.js';
import { AdminError, AdminErrorCode } from './admin-error.js';
import { type MessageKey, sqlOf } from './admin-sql.js';
import { getInboxRow, readSteps, requireConsumer } from './lookup.js';

/** Options of {@link forgetMessage}. */
export interface ForgetOptions {
  /**
   * Lease mode: forget the id even though it has recorded steps, which go with it, so their
   * effects run again when it is processed afresh. Without it such an id throws `HAS_STEPS`
   * ({@link forgetMessage}) or is left in place and counted ({@link forgetRange}).
   * @default false
   */
  readonly forgetSteps?: boolean | undefined;
}

/** What {@link forgetMessage} removed. */
export interface ForgetResult {
  /** Inbox rows removed: 1. */
  readonly removed: number;
  /** Lease-mode steps removed with it. */
  readonly steps: number;
}

/**
 * Forgets a processed id, so that its next delivery is processed afresh: for reprocessing a
 * message after fixing a bug in its handler. Only a `done` row is removed (a discarded failure
 * is `done` too), with its lease-mode steps (only with `forgetSteps`) and its start count. It
 * does not send anything: the message runs again only when the broker delivers it again.
 *
 * Safe while consumers run: one statement deletes the row, so a consumer that claims the id
 * meanwhile either waits and then processes it afresh, or saw the row first and acks a
 * duplicate (a claim that lost the row between two statements is retried, never lost). A
 * first delivery still in its transaction has no committed row yet, and is not forgotten.
 *
 * Throws an {@link AdminError}, nothing changed: `UNKNOWN_CONSUMER`, `UNKNOWN_MESSAGE`,
 * `NOT_DONE` (failed: use {@link retryFailed}; in progress: a lease holder is running it), or
 * `HAS_STEPS` without `forgetSteps`. Needs schema version 6.
 */
export async function forgetMessage(
  db: Queryable,
  schema: string,
  key: MessageKey,
  options: ForgetOptions = {},
): Promise<ForgetResult> {
  checkId(key.messageId);
  const sql = sqlOf(schema);
  const forgetSteps = options.forgetSteps === true;
  // A second pass covers a row that became done between the delete and the diagnosis below.
  for (let pass = 0; pass < 2; pass++) {
    const res = await db.query<{ removed: number; steps: number }>(sql.forgetOne, [
      key.consumer,
      key.messageId,
      forgetSteps,
    ]);
    const row = res.rows[0];
    if (row !== undefined && row.removed > 0) return { removed: row.removed, steps: row.steps };
    // Nothing removed: say why, from what the row is now.
    const found = await getInboxRow(db, schema, key);
    if (found.status !== 'done') {
      throw new AdminError(schema, { code: AdminErrorCode.NotDone, ...key, status: found.status });
    }
    const steps = await readSteps(db, schema, key);
    if (steps.length > 0 && !forgetSteps) {
      throw new AdminError(schema, {
        code: AdminErrorCode.HasSteps,
        ...key,
        steps: steps.map((s) => s.step),
      });
    }
  }
  // Done, no steps in the way, and still not deleted twice over: it keeps changing under us.
  throw new OnceError(
    ErrorCode.Database,
    `message ${JSON.stringify(key.messageId)} of consumer ${JSON.stringify(key.consumer)} kept changing while it was being forgotten; run again`,
    { retryable: true },
  );
}

/** The ids {@link forgetRange} takes: those a consumer processed in a time range. */
export interface ForgetRange {
  /** The consumer name the rows are recorded under. */
  readonly consumer: string;
  /** Rows created (claimed) at or after this time. */
  readonly since: Date;
  /** Rows created before this time. @default now, as the database's clock reads it */
  readonly until?: Date | undefined;
}

/** What {@link countForgetRange} found in a range, by what {@link forgetRange} would do with it. */
export interface ForgetRangeCount {
  /** The database's clock at the count: pass it as `until` to take no row processed later. */
  readonly asOf: Date;
  /** `done` rows without recorded steps: forgotten. */
  readonly done: number;
  /** `done` rows with lease-mode steps: forgotten only with `forgetSteps`. */
  readonly doneWithSteps: number;
  /** `failed` rows: never forgotten (`retryFailed` keeps their body). */
  readonly failed: number;
  /** `in_progress` rows (lease mode, a holder running it): never forgotten. */
  readonly inProgress: number;
}

/** Options of {@link forgetRange}. */
export interface ForgetRangeOptions extends ForgetOptions {
  /** Rows deleted per statement; small batches keep locks short. @default 1000 */
  readonly batchSize?: number | undefined;
  /** Called after each batch with the running total of rows removed. */
  readonly onProgress?: ((removed: number) => void) | undefined;
  /** Stops between batches when aborted. */
  readonly signal?: AbortSignal | undefined;
}

/** What {@link forgetRange} did. */
export interface ForgetRangeResult {
  /** Inbox rows removed. */
  readonly removed: number;
  /** Lease-mode steps removed with them. */
  readonly steps: number;
  /** Whether the signal stopped it before the end of the range. */
  readonly stopped: boolean;
}

/**
 * Counts what {@link forgetRange} would find in `range`, by status. Throws `UNKNOWN_CONSUMER`
 * for a consumer without rows.
 */
export async function countForgetRange(
  db: Queryable,
  schema: string,
  range: ForgetRange,
): Promise<ForgetRangeCount> {
  checkRange(range);
  const sql = sqlOf(schema);
  const r = (
    await db.query<{
      as_of: Date;
      done: number;
      done_with_steps: number;
      failed: number;
      in_progress: number;
    }>(sql.forgetRangeCount, [range.consumer, range.since, range.until ?? null])
  ).rows[0];
  if (r === undefined || r.done + r.done_with_steps + r.failed + r.in_progress === 0) {
    await requireConsumer(db, schema, range.consumer);
  }
  return {
    asOf: r?.as_of ?? new Date(),
    done: r?.done ?? 0,
    doneWithSteps: r?.done_with_steps ?? 0,
    failed: r?.failed ?? 0,
    inProgress: r?.in_progress ?? 0,
  };
}

/**
 * Forgets the ids a consumer processed in `range` (by the time their row was created, i.e.
 * claimed), as {@link forgetMessage} does for one, in batches of `batchSize` rows, each its own
 * statement. `failed` and `in_progress` rows stay; so do rows with lease-mode steps unless
 * `forgetSteps`. Pass `until` (e.g. {@link countForgetRange}'s `asOf`) so that messages
 * processed while it runs are not taken. Safe while consumers run, as {@link forgetMessage}.
 */
export async function forgetRange(
  db: Queryable,
  schema: string,
  range: ForgetRange,
  options: ForgetRangeOptions = {},
): Promise<ForgetRangeResult> {
  checkRange(range);
  const batchSize = options.batchSize ?? 1000;
  if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
    throw new OnceError(ErrorCode.InvalidOption, `batchSize must be a positive integer, got ${batchSize}`);
  }
  const sql = sqlOf(schema);
  // Fixed once, so rows processed while this runs are never taken.
  const until = range.until ?? (await db.query<{ now: Date }>(sql.now)).rows[0]?.now;
  let cursor = '';
  let removed = 0;
  let steps = 0;
  while (!options.signal?.aborted) {
    const r = (
      await db.query<{ last: string | null; removed: number; steps: number }>(sql.forgetRangeStep, [
        range.consumer,
        range.since,
        until,
        cursor,
        options.forgetSteps === true,
        batchSize,
      ])
    ).rows[0];
    if (r === undefined || r.last === null) return { removed, steps, stopped: false };
    cursor = r.last;
    removed += r.removed;
    steps += r.steps;
    if (r.removed > 0) options.onProgress?.(removed);
  }
  return { removed, steps, stopped: true };
}

function checkId(id: string): void {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      `id must be a message id of 1 to ${MAX_ID_LENGTH} characters`,
    );
  }
}

function checkRange(range: ForgetRange): void {
  const valid = (d: Date | undefined) => d === undefined || (d instanceof Date && !Number.isNaN(d.getTime()));
  if (!valid(range.since) || range.since === undefined) {
    throw new OnceError(ErrorCode.InvalidOption, 'since must be a valid Date');
  }
  if (!valid(range.until)) throw new OnceError(ErrorCode.InvalidOption, 'until must be a valid Date');
  if (range.until !== undefined && range.until <= range.since) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      `until (${range.until.toISOString()}) must be after since (${range.since.toISOString()})`,
    );
  }
}
