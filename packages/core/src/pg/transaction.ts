/**
 * A transaction on a checked-out connection, and the one decision of how it ends badly: rolled
 * back and returned, or destroyed when its state is in doubt. Shared by the engine's paths, the
 * lease's and `migrate()`.
 */

import { DeadlineError, ErrorCode, OnceError } from '../errors.js';
import { Connection } from './connection.js';
import type { PgClientLike, PgPoolLike } from './pg-like.js';
import { classifyDbError } from './sqlstate.js';

/**
 * Runs `body` in one transaction on a connection of `pool`: COMMIT when it resolves, ROLLBACK
 * when it throws (the error is rethrown). Rejects with COMMIT_ROLLED_BACK when PostgreSQL answers
 * COMMIT with ROLLBACK (a statement inside had failed and the body carried on): nothing was
 * written. A connection whose state is in doubt (COMMIT or ROLLBACK threw, the socket reported an
 * error while held) is destroyed, not returned to the pool. Used by `migrate()` and
 * `grantRuntime()`; no settings are pinned (a message's transaction is the engine's).
 */
export async function inTransaction<T>(
  pool: PgPoolLike,
  body: (client: PgClientLike) => Promise<T>,
): Promise<T> {
  const conn = await Connection.open(pool);
  let result: T;
  try {
    await conn.client.query('BEGIN');
    result = await body(conn.client);
  } catch (err) {
    await rollback(conn, err);
    throw err;
  }
  let commit: Awaited<ReturnType<PgClientLike['query']>>;
  try {
    commit = await conn.client.query('COMMIT');
  } catch (err) {
    // A deferred constraint ended the transaction, or the connection went with COMMIT's answer:
    // which one is not worth telling apart here. The connection is closed either way.
    conn.destroy(err);
    throw err;
  }
  conn.release();
  if (commit.command === 'ROLLBACK') throw rolledBackError();
  return result;
}

/**
 * Rolls back and returns the connection, or destroys it when its state is in doubt (a handler
 * past its deadline may still be using it; a dead socket cannot roll back).
 */
export async function rollback(conn: Connection, cause: unknown): Promise<void> {
  if (cause instanceof DeadlineError || classifyDbError(cause) === 'connection' || conn.error) {
    conn.destroy(cause);
    return;
  }
  try {
    await conn.client.query('ROLLBACK');
    conn.release();
  } catch (err) {
    conn.destroy(err);
  }
}

/** COMMIT answered ROLLBACK: a statement inside the transaction had failed. */
export function rolledBackError(): OnceError {
  return new OnceError(
    ErrorCode.CommitRolledBack,
    'COMMIT rolled the transaction back: a statement inside it had failed (did the handler catch a query error and carry on?)',
    { retryable: true },
  );
}
