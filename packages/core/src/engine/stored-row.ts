/**
 * What a stored inbox row means to a later delivery of its id. Owns one decision, for the
 * transactional and the lease path alike: a row that a claim did not get is a `conflict` (another
 * fingerprint, per policy), `busy` (still in progress), `failed` again (recorded failed: it is
 * dead-lettered again, never acked as a duplicate) or a `duplicate` with the stored result.
 */

import { hexBytes } from '../message/fingerprint.js';
import type { Outcome } from '../message/outcome.js';
import { fromJsonb } from '../sql/jsonb.js';
import type { Item } from './item.js';
import type { Outcomes } from './outcomes.js';

/** The columns of an inbox row that decide a later delivery's outcome. */
export interface StoredRow {
  status: 'done' | 'failed' | 'in_progress';
  fingerprint: Buffer;
  result: unknown;
}

/** An inbox row as the transactional path reads it. */
export interface InboxRow extends StoredRow {
  message_id: string;
}

/**
 * The outcome of `item`'s delivery given the row that holds its id. `busyDelayMs`: when to
 * redeliver if the row is still in progress (a lease holder's).
 */
export function outcomeOfRow<R>(
  out: Outcomes<R>,
  item: Pick<Item, 'envelope' | 'id' | 'fpHex'>,
  row: StoredRow,
  busyDelayMs: number,
): Outcome<R> {
  const same = Buffer.compare(Buffer.from(row.fingerprint), hexBytes(item.fpHex)) === 0;
  const conflict = out.conflict(item.envelope, item.id, same);
  if (conflict) return conflict;
  if (row.status === 'in_progress') return out.busy(item.envelope, item.id, busyDelayMs);
  if (row.status === 'failed') {
    return out.failed(
      item.envelope,
      item.id,
      'previously-failed',
      new Error('this id was recorded as failed earlier'),
    );
  }
  return {
    status: 'duplicate',
    id: item.id,
    envelope: item.envelope,
    result: (row.result === null || row.result === undefined ? undefined : fromJsonb(row.result)) as
      | R
      | undefined,
  };
}
