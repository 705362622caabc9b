/**
 * Recording failures. Owns one decision: how a message that failed for good is written down so
 * its redeliveries are recognised at once (`failed` again, dead-lettered again), or, with
 * `recordFailed: false`, that it is not: nothing is written, the claim is given back, and a
 * redelivery runs the handler again. The record is
 * an autocommit write that pins synchronous_commit itself (see PIN_SYNC_COMMIT in sql/inbox.ts):
 * the broker is settled on it. When the full record is refused, a minimal one is written; only
 * an unreachable database makes the message `retry` (unspent) instead. Lease mode records through
 * the same function, its write fenced by the lease it holds (see {@link FailureWrite}).
 */

import { serializeError } from '../errors.js';
import { originOf } from '../message/envelope.js';
import { hexBytes } from '../message/fingerprint.js';
import type { FailReason, Outcome } from '../message/outcome.js';
import type { Connection } from '../pg/connection.js';
import type { QueryResultLike } from '../pg/pg-like.js';
import { classifyDbError, isEnvironmental } from '../pg/sqlstate.js';
import { toJsonb } from '../sql/jsonb.js';
import type { EngineContext } from './context.js';
import type { Item } from './item.js';
import { type InboxRow, outcomeOfRow } from './stored-row.js';
import { stmt } from './tx.js';

/** What a failure record needs of an item; `starts` when its start was counted (the attempt judged). */
type RecordedItem = Pick<Item, 'envelope' | 'id' | 'fpHex'> & Partial<Pick<Item, 'starts'>>;

/** The attempt recorded: the counted starts (`attemptIsStarts`), else the envelope's. */
function attemptOf(item: RecordedItem): number {
  return item.starts?.attempt ?? item.envelope.attempt;
}

/** A failure record as its statement takes it: the full one, or the minimal fallback. */
export interface FailureRecord {
  /** The error with its reason, as jsonb text. */
  error: string | null;
  /** The body (cut to `failedBodyMaxBytes`), or null in the minimal record. */
  body: Buffer | null;
  truncated: boolean;
  /** The origin as jsonb text, or null in the minimal record. */
  origin: string | null;
}

/**
 * Writes a failure record, autocommit with synchronous_commit pinned. `rowCount` 0: the write
 * found the id held or recorded by someone else. Lease mode passes its own, fenced by its lease.
 */
export type FailureWrite = (record: FailureRecord) => Promise<QueryResultLike>;

/** The transactional path's write: a new `failed` row. */
function insertRecord<R>(ctx: EngineContext<R>, item: RecordedItem): FailureWrite {
  const { pool, consumer, retentionMs } = ctx.o;
  const { id } = item;
  return (r) =>
    pool.query(ctx.sql.recordFailed, [
      consumer,
      id,
      hexBytes(item.fpHex),
      retentionMs,
      r.error,
      r.body,
      r.truncated,
      attemptOf(item),
      r.origin,
    ]);
}

/**
 * Records the message `failed` in its own transaction, so its redeliveries are recognised at
 * once. The verdict stands whatever happens here: when the full record cannot be stored (what
 * the error or the origin holds is refused), a minimal one is, and the message is dead-lettered
 * either way. Only when the database cannot be reached is it `retry`, unspent: the redelivery
 * comes to the same verdict and records it then.
 * `write`: how the record is written (lease mode's is fenced by its lease); a new row by default.
 */
export async function recordFailed<R>(
  ctx: EngineContext<R>,
  item: RecordedItem,
  reason: FailReason,
  error: unknown,
  write: FailureWrite = insertRecord(ctx, item),
): Promise<Outcome<R>> {
  const { pool, consumer, failedBodyMaxBytes } = ctx.o;
  const { envelope, id } = item;
  const out = ctx.out;
  // The claim went with the rolled-back transaction.
  if (!ctx.o.recordFailed) return out.failed(envelope, id, reason, error, attemptOf(item));
  const serialized = serializeError(error);
  let res: QueryResultLike;
  try {
    res = await write({
      error: toJsonb({ ...serialized, reason }),
      body: envelope.body.subarray(0, failedBodyMaxBytes),
      truncated: envelope.body.length > failedBodyMaxBytes,
      origin: toJsonb(JSON.parse(originOf(envelope))),
    });
  } catch (err) {
    if (isEnvironmental(classifyDbError(err))) return out.retry(envelope, id, err, false, attemptOf(item));
    const minimal = {
      name: serialized.name,
      message: `the full failure record could not be stored (${serializeError(err).message}); the message was dead-lettered with its error`,
      reason,
    };
    try {
      res = await write({
        error: JSON.stringify(minimal),
        body: null,
        truncated: envelope.body.length > 0,
        origin: null,
      });
    } catch (again) {
      if (isEnvironmental(classifyDbError(again)))
        return out.retry(envelope, id, again, false, attemptOf(item));
      ctx.o.logger.error(
        {
          consumer,
          id,
          error: serializeError(again).message,
        },
        'once: a failed message could not be recorded; dead-lettering it anyway',
      );
      return out.failed(envelope, id, reason, error, attemptOf(item));
    }
  }
  if (res.rowCount === 0) {
    // Someone recorded the id meanwhile (a rival processed it, or failed it first), or in lease
    // mode took the lease over: the row says which.
    try {
      const row = (await pool.query<InboxRow>(ctx.sql.readOne, [consumer, id])).rows[0];
      if (row) return outcomeOfRow(out, item, row, ctx.o.busyDelayMs);
    } catch (err) {
      return out.retry(envelope, id, err, false, attemptOf(item));
    }
  }
  return out.failed(envelope, id, reason, error, attemptOf(item));
}

/**
 * Savepoint batches: the handler's work was rolled back to its savepoint and its claim is still
 * held; the claim becomes the failed record, committed with the batch (with `recordFailed:
 * false`, the claim is deleted instead, so the batch commits no claim for it).
 */
export async function markFailedInTx<R>(
  ctx: EngineContext<R>,
  conn: Connection,
  item: Item,
  reason: FailReason,
  error: unknown,
): Promise<Outcome<R>> {
  if (!ctx.o.recordFailed) {
    await stmt(conn.client.query(ctx.sql.unclaim, [ctx.o.consumer, [item.id]]));
    return ctx.out.failed(item.envelope, item.id, reason, error, attemptOf(item));
  }
  const max = ctx.o.failedBodyMaxBytes;
  await stmt(
    conn.client.query(ctx.sql.markFailed, [
      ctx.o.consumer,
      item.id,
      toJsonb({ ...serializeError(error), reason }),
      item.envelope.body.subarray(0, max),
      item.envelope.body.length > max,
      attemptOf(item),
      toJsonb(JSON.parse(originOf(item.envelope))),
    ]),
  );
  return ctx.out.failed(item.envelope, item.id, reason, error, attemptOf(item));
}
