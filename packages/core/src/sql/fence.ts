import type { FingerprintHex } from '../fingerprint.js';
import type { IsolationLevel } from '../isolation.js';
import { byteaHexLiteral, quoteLiteral } from './literal.js';

/**
 * Statements of offset fencing, built once per schema (validated and quoted, like inboxSql).
 * A fence row holds the next offset to process per (consumer, stream, partition); a message
 * below it is a duplicate. Every move of the fence also records the id and fingerprint of the
 * message it moved past (`last_id`, `last_fingerprint`: the message at next_offset - 1), so an
 * adapter can check the log still holds it (see readFence). Values go as parameters, except in
 * `beginAndFence` (see literal.ts).
 */
export function fenceSql(schema: string) {
  const fences = `${schema}.fences`;
  const inbox = `${schema}.inbox`;
  return Object.freeze({
    /**
     * BEGIN with its settings and the fence claim in one round trip. The upsert moves the fence
     * past the offset only when the offset is at or above it; its row lock makes a rival claim
     * on the same partition wait, then (READ COMMITTED re-checks the row) find it moved. The
     * last result's rowCount is 1 when claimed, 0 for a duplicate.
     */
    beginAndFence: (isolation: IsolationLevel, lockTimeoutMs: number) => {
      const begin = `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}; SET LOCAL synchronous_commit = on; SET LOCAL lock_timeout = ${Math.floor(lockTimeoutMs)}`;
      return (
        consumer: string,
        stream: string,
        partition: number,
        offset: bigint,
        id: string,
        fpHex: FingerprintHex,
      ): string =>
        `${begin}; INSERT INTO ${fences} AS f (consumer, stream, partition, next_offset, last_id, last_fingerprint) VALUES (${quoteLiteral(consumer)}, ${quoteLiteral(stream)}, ${Math.floor(partition)}, ${(offset + 1n).toString()}, ${quoteLiteral(id)}, ${byteaHexLiteral(fpHex)}) ON CONFLICT (consumer, stream, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, last_id = EXCLUDED.last_id, last_fingerprint = EXCLUDED.last_fingerprint WHERE f.next_offset <= ${offset.toString()}`;
    },
    /**
     * A fenced batch: BEGIN with its settings and a lock on the partition's fence row, in one
     * round trip. On an existing row the upsert changes nothing but takes the row lock (a rival
     * message or batch of the partition waits) and returns the next offset to process; a new row
     * starts at the batch's first offset. Last result: one row, `next_offset` as text.
     */
    beginAndLockFence: (isolation: IsolationLevel, lockTimeoutMs: number) => {
      const begin = `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}; SET LOCAL synchronous_commit = on; SET LOCAL lock_timeout = ${Math.floor(lockTimeoutMs)}`;
      return (consumer: string, stream: string, partition: number, firstOffset: bigint): string =>
        `${begin}; INSERT INTO ${fences} AS f (consumer, stream, partition, next_offset) VALUES (${quoteLiteral(consumer)}, ${quoteLiteral(stream)}, ${Math.floor(partition)}, ${firstOffset.toString()}) ON CONFLICT (consumer, stream, partition) DO UPDATE SET next_offset = f.next_offset RETURNING next_offset::text AS next_offset`;
    },
    /**
     * Moves a fence the batch holds locked past its last message. $1 consumer, $2 stream,
     * $3 partition, $4 next offset (text), $5 the last message's id, $6 its fingerprint.
     */
    advance: `UPDATE ${fences} SET next_offset = $4::bigint, last_id = $5, last_fingerprint = $6
      WHERE consumer = $1 AND stream = $2 AND partition = $3 AND next_offset < $4::bigint`,
    /**
     * A permanent failure on the fenced path: moves the fence past the message and records the
     * `failed` inbox row in one statement (a redelivery below the fence finds that row and is
     * `failed` again). Nothing is written when a rival moved the fence first.
     * $1 consumer, $2 id, $3 fingerprint, $4 retention ms, $5 error, $6 body, $7 truncated,
     * $8 attempts, $9 stream, $10 partition, $11 offset (text).
     */
    recordFailed: `WITH f AS (
        INSERT INTO ${fences} AS f (consumer, stream, partition, next_offset, last_id, last_fingerprint)
        VALUES ($1, $9, $10, $11::bigint + 1, $2, $3)
        ON CONFLICT (consumer, stream, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset,
          last_id = EXCLUDED.last_id, last_fingerprint = EXCLUDED.last_fingerprint
        WHERE f.next_offset <= $11::bigint RETURNING 1)
      INSERT INTO ${inbox}
        (consumer, message_id, fingerprint, status, expires_at, error, body, body_truncated, attempts, origin)
      SELECT $1, $2, $3, 'failed', now() + $4 * interval '1 millisecond', $5::jsonb, $6, $7, $8, $12::jsonb
      WHERE EXISTS (SELECT 1 FROM f)
      ON CONFLICT DO NOTHING RETURNING message_id`,
    /**
     * $1 consumer, $2 stream, $3 partition. The next offset to process (text) and the id and
     * fingerprint of the message before it (NULL on rows from before schema version 7).
     */
    read: `SELECT next_offset::text AS next_offset, last_id, last_fingerprint FROM ${fences}
      WHERE consumer = $1 AND stream = $2 AND partition = $3`,
  });
}

export type FenceSql = ReturnType<typeof fenceSql>;
