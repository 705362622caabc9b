import type { FingerprintHex } from '../message/fingerprint.js';
import type { IsolationLevel } from './isolation.js';
import { byteaHexLiteral, byteaLiteral, integerLiteral, quoteLiteral } from './literal.js';

/** Where a stored 4xx rolls the handler's writes back to: taken in the claim's own round trip. */
const SAVEPOINT = 'once_http_handler';

/** The row of an HTTP key as the claim's round trip reads it. */
export interface HttpKeyRow {
  status: 'done' | 'failed' | 'in_progress';
  fingerprint: Buffer;
  result: unknown;
  response_status: number | null;
  response_headers: Array<[string, string]> | null;
  response_body: Buffer | null;
}

/**
 * The statements of `@once/http`'s keys (stored responses: migration 8), built once per schema.
 * The schema is the only identifier spliced in, validated and quoted by `quoteIdentifier`. The
 * claim and the store-and-commit are simple queries with literals (see literal.ts), each one round
 * trip; the rest take parameters.
 */
export function httpSql(schema: string) {
  const inbox = `${schema}.inbox`;
  const responseCols = 'response_status, response_headers, response_body';
  return Object.freeze({
    /**
     * One round trip before the handler runs, four statements: BEGIN; the claim, which inserts the
     * key's row as a message's claim does (its settings pinned before the insert can wait, see
     * sql/inbox.ts; rowCount 1 when claimed); a read of the key's row, so a replay needs no second
     * round trip; and the savepoint a stored 4xx rolls back to. The read is a statement of its
     * own, never part of the claim's: under READ COMMITTED it takes a new snapshot, which holds a
     * rival that committed while the claim waited on it (a claim and read in one statement would
     * miss it). After a claim it reads the new row itself, with no response. Results: BEGIN's, the
     * claim's, the read's, the savepoint's.
     */
    beginClaimAndRead: (isolation: IsolationLevel, lockTimeoutMs: number) => {
      const begin = `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}`;
      const pin = `(SELECT set_config('synchronous_commit', 'on', true), set_config('lock_timeout', '${Math.floor(lockTimeoutMs)}', true)) AS pin`;
      return (consumer: string, id: string, fpHex: FingerprintHex, retentionMs: number): string => {
        const c = quoteLiteral(consumer);
        const m = quoteLiteral(id);
        return `${begin}; INSERT INTO ${inbox} (consumer, message_id, fingerprint, status, expires_at) SELECT ${c}, ${m}, ${byteaHexLiteral(fpHex)}, 'done', now() + ${Math.floor(retentionMs)} * interval '1 millisecond' FROM ${pin} ON CONFLICT DO NOTHING; SELECT status, fingerprint, result, ${responseCols} FROM ${inbox} WHERE consumer = ${c} AND message_id = ${m}; SAVEPOINT ${SAVEPOINT}`;
      };
    },
    /**
     * One round trip after the handler: for a 4xx the rollback of its writes and outbox rows to
     * the claim's savepoint, the response stored on the key's row, and COMMIT. The row is there:
     * the claim inserted it in this transaction and holds its lock (only the handler's own SQL
     * could delete it; the caller checks the UPDATE's count after). Results: [the rollback's,] the
     * UPDATE's, COMMIT's.
     */
    storeAndCommit: (
      consumer: string,
      id: string,
      status: number,
      headersJson: string,
      body: Buffer,
      undoWrites: boolean,
    ): string =>
      `${undoWrites ? `ROLLBACK TO SAVEPOINT ${SAVEPOINT}; ` : ''}UPDATE ${inbox} SET response_status = ${integerLiteral(status)}, response_headers = ${quoteLiteral(headersJson)}::jsonb, response_body = ${byteaLiteral(body)} WHERE consumer = ${quoteLiteral(consumer)} AND message_id = ${quoteLiteral(id)}; COMMIT`,
    /** Lease mode: opened with `ctx.tx`'s BEGIN, where a stored 4xx rolls the handler's writes back to. */
    savepoint: `SAVEPOINT ${SAVEPOINT}`,
    rollbackToSavepoint: `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`,
  });
}

export type HttpSql = ReturnType<typeof httpSql>;
