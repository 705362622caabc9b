import type { Envelope } from './envelope.js';
import { ErrorCode, OnceError } from './errors.js';
import type { PgPoolLike } from './pg-like.js';
import { fenceSql } from './sql/fence.js';

/**
 * A message's place in an ordered stream, for offset fencing: `offset` is the broker's position
 * of the message in (`stream`, `partition`), a non-negative integer as a bigint or decimal string.
 */
export interface FencePosition {
  /** The ordered stream, e.g. a Kafka topic. */
  stream: string;
  /** The partition of the stream (a non-negative integer). */
  partition: number;
  /** The message's offset in the partition. */
  offset: bigint | string;
}

/**
 * Offset fencing: returns the message's position to fence it on, or `undefined` to use the inbox
 * row as usual. See `InboxOptions.fenceOf`.
 */
export type FenceOf = (envelope: Envelope) => FencePosition | undefined;

/** A validated position. */
export interface Fence {
  readonly stream: string;
  readonly partition: number;
  readonly offset: bigint;
}

const DECIMAL = /^(0|[1-9][0-9]{0,18})$/;
const MAX_OFFSET = 2n ** 63n - 2n;

/** Calls `fenceOf` and validates what it returns; throws INVALID_ID (the message cannot be placed). */
export function resolveFence(envelope: Envelope, fenceOf: FenceOf): Fence | undefined {
  const p = fenceOf(envelope);
  if (p === undefined) return undefined;
  const bad = (what: string) =>
    new OnceError(ErrorCode.InvalidId, `fenceOf() returned ${what}`, { retryable: false });
  if (typeof p !== 'object' || p === null) throw bad('neither a position nor undefined');
  if (typeof p.stream !== 'string' || p.stream.length === 0 || p.stream.includes('\0')) {
    throw bad(`a bad stream ${JSON.stringify(p.stream)}`);
  }
  if (!Number.isSafeInteger(p.partition) || p.partition < 0 || p.partition > 2_147_483_647) {
    throw bad(`a bad partition ${JSON.stringify(p.partition)}`);
  }
  let offset: bigint;
  if (typeof p.offset === 'bigint') offset = p.offset;
  else if (typeof p.offset === 'string' && DECIMAL.test(p.offset)) offset = BigInt(p.offset);
  else throw bad(`a bad offset ${JSON.stringify(String(p.offset))}`);
  if (offset < 0n || offset > MAX_OFFSET) throw bad(`an offset out of range (${offset})`);
  return Object.freeze({ stream: p.stream, partition: p.partition, offset });
}

/** A partition's fence as stored: where it stands and what it last moved past. */
export interface FenceRecord {
  /** The next offset to process: every offset below it counts as done. */
  readonly nextOffset: bigint;
  /**
   * Id and fingerprint of the message at `nextOffset - 1`, the last one the fence moved past.
   * Undefined on a row written before schema version 7, until the fence next moves.
   */
  readonly lastId: string | undefined;
  readonly lastFingerprint: Buffer | undefined;
}

/**
 * Reads the fence of (`consumer`, `stream`, `partition`) outside any transaction; `undefined`
 * when nothing was fenced there yet. An adapter uses it to check, before it takes offsets below
 * the fence for duplicates, that the log still holds the message the fence last moved past (a
 * deleted and recreated topic numbers its offsets from 0 again). `quotedSchema` is the inbox's
 * `options.quotedSchema`.
 */
export async function readFence(
  pool: PgPoolLike,
  quotedSchema: string,
  at: { consumer: string; stream: string; partition: number },
): Promise<FenceRecord | undefined> {
  const res = await pool.query<{
    next_offset: string;
    last_id: string | null;
    last_fingerprint: Buffer | null;
  }>(fenceSql(quotedSchema).read, [at.consumer, at.stream, at.partition]);
  const row = res.rows[0];
  if (!row) return undefined;
  return {
    nextOffset: BigInt(row.next_offset),
    lastId: row.last_id ?? undefined,
    lastFingerprint: row.last_fingerprint ?? undefined,
  };
}
