/**
 * The replay marker of an ordered consumer, kept in PostgreSQL for broker clients that cannot keep
 * it in the committed offset's metadata (schema version 11, `inflight`). Owns one decision: the
 * end of the range about to run is committed on its own, flushed, before the range runs, so a
 * consumer that dies inside it leaves the range noted for the next owner of the partition.
 */

import { ErrorCode, OnceError } from '../errors.js';
import type { EngineContext } from './context.js';

/** A Kafka offset: a non-negative 64-bit integer, in decimal. */
const OFFSET = /^\d{1,19}$/;
const MAX_OFFSET = 2n ** 63n - 1n;

/** Throws INVALID_OPTION naming the first bad argument of a marker call. */
function checkPosition(stream: string, partition: number): void {
  if (typeof stream !== 'string' || stream.length === 0)
    throw new OnceError(ErrorCode.InvalidOption, `stream must be a non-empty string, got ${String(stream)}`);
  if (!Number.isInteger(partition) || partition < 0 || partition > 2_147_483_647)
    throw new OnceError(
      ErrorCode.InvalidOption,
      `partition must be an integer from 0 to 2147483647, got ${String(partition)}`,
    );
}

/** Notes `endOffset` as the last offset of the range about to run on `stream`/`partition`. */
export async function noteInflight<R>(
  ctx: EngineContext<R>,
  stream: string,
  partition: number,
  endOffset: string,
): Promise<void> {
  checkPosition(stream, partition);
  if (typeof endOffset !== 'string' || !OFFSET.test(endOffset) || BigInt(endOffset) > MAX_OFFSET)
    throw new OnceError(
      ErrorCode.InvalidOption,
      `endOffset must be a decimal offset from 0 to ${MAX_OFFSET}, got ${JSON.stringify(endOffset)}`,
    );
  const { pool, consumer } = ctx.o;
  await pool.query(ctx.sql.noteInflight, [consumer, stream, partition, endOffset]);
}

/** The end noted for `stream`/`partition` (decimal text), or null when none was. */
export async function inflightEnd<R>(
  ctx: EngineContext<R>,
  stream: string,
  partition: number,
): Promise<string | null> {
  checkPosition(stream, partition);
  const { pool, consumer } = ctx.o;
  const res = await pool.query<{ end_offset: string }>(ctx.sql.inflightEnd, [consumer, stream, partition]);
  return res.rows[0]?.end_offset ?? null;
}
