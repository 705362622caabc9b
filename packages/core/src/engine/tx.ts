/**
 * Transaction plumbing, shared by every path that holds a connection (single, batch, lease).
 * Owns one decision: what becomes of a connection whose transaction ends badly (rolled back and
 * returned, or destroyed when in doubt). Also tags once's own statement errors so they
 * stay apart from the handler's.
 */

import type { Connection } from '../connection.js';
import { ErrorCode, OnceError } from '../errors.js';
import type { QueryResultLike } from '../pg-like.js';
import { DeadlineError } from '../run-handler.js';
import { classifyDbError } from '../sqlstate.js';

/** Marker for errors raised by once's own statements, as opposed to the handler's. */
export class StatementError extends Error {
  constructor(readonly original: unknown) {
    super('statement failed');
  }
}

/** Tags a failure of one of our own statements so handler errors and ours stay apart. */
export function stmt<T>(p: Promise<T>): Promise<T> {
  // One reaction on the promise, not an async function's own promise and its extra turns.
  return p.then(undefined, asStatementError);
}

function asStatementError(err: unknown): never {
  throw new StatementError(err);
}

/** The error itself, unwrapped from {@link StatementError}. */
export function causeOf(err: unknown): unknown {
  return err instanceof StatementError ? err.original : err;
}

/** The last result of a multi-statement simple query (BEGIN; SET ...; claim). */
export function lastResult<T>(results: unknown): QueryResultLike<T> {
  return (Array.isArray(results) ? results[results.length - 1] : results) as QueryResultLike<T>;
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
