/**
 * An HTTP key in its own transaction (`createHttpInbox`, for `@once/http`). Owns one decision: the
 * shape of that transaction, three round trips as a plain route's BEGIN, write, COMMIT: BEGIN, the
 * claim and a savepoint in one (the claim also returns the row in its way, so a replay needs
 * nothing more); the handler's own statements; then, in one simple query, the rollback to the
 * savepoint when a 4xx undoes the handler's writes, the response stored on the key's row, and
 * COMMIT. A replay's transaction is ended without the answer waiting for it.
 */

import { Connection } from '../connection.js';
import { type HttpResponseToStore, httpResponseProblem, responseOfRow } from '../http-response-store.js';
import type { Outcome } from '../outcome.js';
import type { QueryResultLike } from '../pg-like.js';
import { type HttpClaimRow, type HttpSql, httpSql } from '../sql/http.js';
import type { EngineContext } from './context.js';
import { afterHandlerError, afterStatementError, handlerFailed } from './failures.js';
import { runInTx } from './handler-in-tx.js';
import type { Item } from './item.js';
import { vanished } from './single-tx.js';
import { outcomeOfRow } from './stored-row.js';
import { lastResult, rolledBackError, stmt } from './tx.js';

export class HttpTx<R> {
  readonly #ctx: EngineContext<R>;
  readonly #sql: HttpSql;
  readonly #claim: ReturnType<HttpSql['beginAndClaim']>;

  constructor(ctx: EngineContext<R>) {
    this.#ctx = ctx;
    this.#sql = httpSql(ctx.o.quotedSchema);
    this.#claim = this.#sql.beginAndClaim(ctx.o.isolation, ctx.o.lockTimeoutMs);
  }

  async one(item: Item): Promise<Outcome<R>> {
    const ctx = this.#ctx;
    const { pool, consumer, retentionMs } = ctx.o;
    let conn: Connection;
    try {
      conn = await Connection.open(pool);
    } catch (err) {
      return ctx.out.unavailable(item.envelope, item.id, err);
    }
    let started = false;
    try {
      const results = await stmt(conn.client.query(this.#claim(consumer, item.id, item.fpHex, retentionMs)));
      const claim = (results as unknown as QueryResultLike<HttpClaimRow>[])[1]!.rows[0]!;
      if (claim.claimed === 0) {
        // A NULL status: the row that made the claim wait committed after the statement's
        // snapshot; a new statement sees it (or nothing, if it rolled back).
        const row =
          claim.status !== null
            ? claim
            : (await stmt(conn.client.query<HttpClaimRow>(this.#sql.readRow, [consumer, item.id]))).rows[0];
        endAside(conn);
        return row ? this.#ofRow(item, row) : ctx.out.retry(item.envelope, item.id, vanished(), false);
      }
      started = true;
      const run = await runInTx(ctx, conn.client, item);
      if (!run.ok) return await afterHandlerError(ctx, conn, item, run.error);
      const response = run.result as unknown as HttpResponseToStore;
      const bad = httpResponseProblem(response);
      if (bad) return await afterHandlerError(ctx, conn, item, new TypeError(bad));
      const text = this.#sql.storeAndCommit(
        consumer,
        item.id,
        response.status,
        JSON.stringify(response.headers),
        response.body,
        response.undoWrites,
      );
      const commit = lastResult(await stmt(conn.client.query(text)));
      conn.release();
      if (commit.command === 'ROLLBACK') return await handlerFailed(ctx, item, rolledBackError());
      if (run.published && !response.undoWrites) ctx.o.outbox?.wake();
      return { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
    } catch (err) {
      return await afterStatementError(ctx, conn, item, err, started);
    }
  }

  /** The outcome of the row in the claim's way; a duplicate carries its stored response. */
  #ofRow(item: Item, row: HttpClaimRow): Outcome<R> {
    const ctx = this.#ctx;
    const stored = { status: row.status!, fingerprint: row.fingerprint!, result: row.result };
    const outcome = outcomeOfRow(ctx.out, item, stored, ctx.o.busyDelayMs);
    if (outcome.status !== 'duplicate') return outcome;
    return { ...outcome, result: responseOfRow(row) as R | undefined };
  }
}

/**
 * Ends a transaction that wrote nothing (the claim got no row) without the caller waiting: the
 * outcome is decided by what committed rows said, so the answer need not wait for ROLLBACK. The
 * connection goes back when ROLLBACK is done, or is destroyed if it fails.
 */
function endAside(conn: Connection): void {
  conn.client.query('ROLLBACK').then(
    () => conn.release(),
    (err: unknown) => conn.destroy(err),
  );
}
