import type { FingerprintHex } from '../fingerprint.js';
import type { IsolationLevel } from '../isolation.js';
import { byteaHexLiteral, byteaLiteral, integerLiteral, quoteLiteral } from './literal.js';

/** Where a stored 4xx rolls the handler's writes back to: taken in the claim's own round trip. */
const SAVEPOINT = 'once_http_handler';

/** What the HTTP claim statement returns: `claimed` 1, or 0 with the row in the way when visible. */
export interface HttpClaimRow {
  claimed: number;
  status: 'done' | 'failed' | 'in_progress' | null;
  fingerprint: Buffer | null;
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
     * One round trip before the handler runs: BEGIN, the claim, and the savepoint a stored 4xx
     * rolls back to. The claim inserts the key's row as a message's claim does (its settings
     * pinned before the insert can wait, see sql/inbox.ts) and returns one row: `claimed` 1 when
     * it inserted, else 0 with the row that stood in the way, read in the same statement so a
     * replay needs no second read. That read sees the statement's snapshot only: a rival that
     * committed while the insert waited on it is not in it (the columns come back NULL), and the
     * caller reads the row again in a new statement. The third result is the savepoint's.
     */
    beginAndClaim: (isolation: IsolationLevel, lockTimeoutMs: number) => {
      const begin = `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}`;
      const pin = `(SELECT set_config('synchronous_commit', 'on', true), set_config('lock_timeout', '${Math.floor(lockTimeoutMs)}', true)) AS pin`;
      return (consumer: string, id: string, fpHex: FingerprintHex, retentionMs: number): string => {
        const c = quoteLiteral(consumer);
        const m = quoteLiteral(id);
        return `${begin}; WITH claim AS (INSERT INTO ${inbox} (consumer, message_id, fingerprint, status, expires_at) SELECT ${c}, ${m}, ${byteaHexLiteral(fpHex)}, 'done', now() + ${Math.floor(retentionMs)} * interval '1 millisecond' FROM ${pin} ON CONFLICT DO NOTHING RETURNING 1) SELECT (SELECT count(*) FROM claim)::int AS claimed, i.status, i.fingerprint, i.result, i.response_status, i.response_headers, i.response_body FROM (SELECT 1) AS one LEFT JOIN ${inbox} AS i ON NOT EXISTS (SELECT 1 FROM claim) AND i.consumer = ${c} AND i.message_id = ${m}; SAVEPOINT ${SAVEPOINT}`;
      };
    },
    /** The row a claim did not get, read in a new statement (so it sees a rival that just committed). $1 consumer, $2 id. */
    readRow: `SELECT 0 AS claimed, status, fingerprint, result, ${responseCols} FROM ${inbox}
      WHERE consumer = $1 AND message_id = $2`,
    /**
     * One round trip after the handler: for a 4xx the rollback of its writes and outbox rows to
     * the claim's savepoint, the response stored on the key's row, and COMMIT. A row that is not
     * there (it cannot be: the claim inserted it in this transaction and holds its lock) fails the
     * statement (division by zero) rather than committing a key without its response; after an
     * error the rest of the string is skipped, COMMIT included. The last result is COMMIT's.
     */
    storeAndCommit: (
      consumer: string,
      id: string,
      status: number,
      headersJson: string,
      body: Buffer,
      undoWrites: boolean,
    ): string =>
      `${undoWrites ? `ROLLBACK TO SAVEPOINT ${SAVEPOINT}; ` : ''}WITH stored AS (UPDATE ${inbox} SET response_status = ${integerLiteral(status)}, response_headers = ${quoteLiteral(headersJson)}::jsonb, response_body = ${byteaLiteral(body)} WHERE consumer = ${quoteLiteral(consumer)} AND message_id = ${quoteLiteral(id)} RETURNING 1) SELECT 1 / count(*)::int AS stored FROM stored; COMMIT`,
    /** Lease mode: opened with `ctx.tx`'s BEGIN, where a stored 4xx rolls the handler's writes back to. */
    savepoint: `SAVEPOINT ${SAVEPOINT}`,
    rollbackToSavepoint: `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`,
    /** A completed key's row. $1 consumer, $2 id. */
    readResponse: `SELECT status, ${responseCols} FROM ${inbox}
      WHERE consumer = $1 AND message_id = $2`,
  });
}

export type HttpSql = ReturnType<typeof httpSql>;
