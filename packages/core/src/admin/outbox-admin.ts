import { ErrorCode, OnceError } from '../errors.js';
import { MAX_ID_LENGTH } from '../message/envelope.js';
import type { Queryable } from '../pg/pg-like.js';
import { quoteIdentifier } from '../sql/identifier.js';
import { outboxChannel, outboxSql } from '../sql/outbox.js';
import { AdminError, AdminErrorCode } from './admin-error.js';
import { sqlOf } from './admin-sql.js';

/** Which parked outbox rows {@link retryOutbox} puts back: one by id, or all. */
export type OutboxRetrySelector =
  | {
      /** The row's UUID, or the message id it was enqueued with (a republished message keeps its own). */
      readonly id: string;
    }
  | {
      /** Every parked row of the schema. */
      readonly allFailed: true;
    };

/**
 * Puts failed (parked) outbox rows back to pending with a fresh attempt budget, due now, and
 * wakes the relays after the update committed. Returns how many rows went back. For one `id`,
 * throws an {@link AdminError}: `UNKNOWN_OUTBOX_ID`, or `OUTBOX_NOT_FAILED` for a row that is
 * pending or sent.
 */
export async function retryOutbox(
  db: Queryable,
  schema: string,
  selector: OutboxRetrySelector,
): Promise<number> {
  const sql = sqlOf(schema);
  let retried: number;
  if ('id' in selector) {
    const { id } = selector;
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        `id must be an outbox message id of 1 to ${MAX_ID_LENGTH} characters`,
      );
    }
    retried = (await db.query(sql.outboxRetryOne, [id])).rowCount ?? 0;
    if (retried === 0) {
      const found = (await db.query<{ status: 'pending' | 'sent' }>(sql.outboxFind, [id])).rows[0];
      throw new AdminError(
        schema,
        found
          ? { code: AdminErrorCode.OutboxNotFailed, id, status: found.status }
          : { code: AdminErrorCode.UnknownOutboxId, id },
      );
    }
  } else {
    retried = (await db.query(sql.outboxRetryAll)).rowCount ?? 0;
  }
  // Relays poll anyway; the wake-up only saves them the wait.
  if (retried > 0) await wakeRelays(db, schema);
  return retried;
}

/**
 * Tells the relays of `schema` there is work (NOTIFY on its channel, `outboxChannel`). Call it
 * after commit, never inside a transaction that writes: a NOTIFY there takes a cluster-wide lock
 * until commit.
 */
export async function wakeRelays(db: Queryable, schema: string): Promise<void> {
  await db.query(outboxSql(quoteIdentifier(schema, 'schema')).notify, [outboxChannel(schema)]);
}
