/**
 * Statement plumbing, shared by every path that holds a connection (single, batch, lease): tags
 * once's own statement errors so they stay apart from the handler's. What becomes of a connection
 * whose transaction ends badly is `pg/transaction.ts`'s decision.
 */

import type { QueryResultLike } from '../pg/pg-like.js';

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
