import type { QueryResultLike } from './pg-like.js';

/**
 * A transaction that the caller's data library opens, commits and rolls back (a Prisma
 * interactive transaction, a TypeORM `EntityManager.transaction`, MikroORM's `em.transactional`,
 * `knex.transaction`). Set as the inbox's `transactions` option, once claims each message inside
 * one such transaction, through its raw-SQL call, and settles the broker only after
 * {@link CallerTransactions.run} resolved, that is after the library's COMMIT resolved. A rejected
 * `run` (the handler threw, the deadline passed, COMMIT failed) leaves the claim rolled back with
 * the handler's writes, and the message unsettled, as in once's own transactions.
 *
 * The bindings (`@once/core/prisma`, `@once/core/typeorm`) implement it; implement it yourself for
 * another library. `T` is the library's transaction object.
 */
export interface CallerTransactions<T = unknown> {
  /**
   * Opens a transaction, calls `body` with the library's transaction object, and COMMITs when
   * `body` resolves; resolves with `body`'s value after the COMMIT resolved. When `body` rejects,
   * rolls back and rejects with `body`'s error (or the library's own). `timeoutMs` is the
   * handler's deadline: a library that times its transactions (Prisma's `timeout`) should close
   * the transaction no later than shortly after it.
   */
  run<X>(
    body: (tx: T) => Promise<X>,
    options: {
      /** The handler's deadline, in milliseconds: close the transaction no later than shortly after it. */
      timeoutMs: number;
    },
  ): Promise<X>;
  /**
   * Runs one statement with `$1`-style parameters in `tx`, as the library's raw-SQL call does
   * (`tx.$queryRawUnsafe`, `manager.query`). Once's statements always return the rows they count
   * (`RETURNING`), so `rowCount` may be the number of rows returned.
   */
  query(tx: T, text: string, values: unknown[]): Promise<QueryResultLike<Record<string, unknown>>>;
  /**
   * The SQLSTATE a library error stands for, when the library hides it (Prisma reports a lock
   * timeout as P2010 with the code in its message). Once reads it to tell a lock timeout (`busy`),
   * a deadlock or serialization failure (run again) and a lost connection from the message's own
   * failures. Leave it out when the library keeps pg's `code` on its errors (TypeORM does).
   */
  sqlstate?(error: unknown): string | undefined;
}

/**
 * `error` as once's failure policy should see it: with `code` set to the SQLSTATE the library
 * reports through {@link CallerTransactions.sqlstate}. The original stays the prototype, so its
 * message, name and `instanceof` are unchanged.
 */
export function withSqlstate(owner: CallerTransactions, error: unknown): unknown {
  const code = owner.sqlstate?.(error);
  if (code === undefined || typeof error !== 'object' || error === null) return error;
  if ((error as { code?: unknown }).code === code) return error;
  return Object.create(error, { code: { value: code, enumerable: true } });
}

/** Checks the shape of the `transactions` option. */
export function isCallerTransactions(value: unknown): value is CallerTransactions {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as CallerTransactions).run === 'function' &&
    typeof (value as CallerTransactions).query === 'function'
  );
}
