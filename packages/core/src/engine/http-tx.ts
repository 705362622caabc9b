/**
 * An HTTP key in its own transaction (`createHttpInbox`, for `@once/http`). Owns one decision: the
 * shape of that transaction, the round trips of a plain route's BEGIN, writes, COMMIT: BEGIN, the
 * claim, a read of the key's row and a savepoint in one (so a replay needs nothing more); the
 * handler's own statements; then, in one simple query, the rollback to the savepoint when a 4xx
 * undoes the handler's writes, the response stored on the key's row, and COMMIT. A replay's
 * transaction is ended without the answer waiting for it.
 */

import { ErrorCode, OnceError } from '../errors.js';
import type { Outcome } from '../message/outcome.js';
import { Connection } from '../pg/connection.js';
import type { QueryResultLike } from '../pg/pg-like.js';
import { rolledBackError } from '../pg/transaction.js';
import { type HttpKeyRow, type HttpSql, httpSql } from '../sql/http.js';
import type { EngineContext } from './context.js';
import { afterHandlerError, afterStatementError, handlerFailed } from './failures.js';
import { runInTx } from './handler-in-tx.js';
import { type HttpResponseToStore, httpResponseProblem, responseOfRow } from './http-response-store.js';
import type { Item } from './item.js';
import { vanished } from './single-tx.js';
import { outcomeOfRow } from './stored-row.js';
import { stmt } from './tx.js';

export class HttpTx<R> {
  readonly #ctx: EngineContext<R>;
  readonly #sql: HttpSql;
  readonly #claim: ReturnType<HttpSql['beginClaimAndRead']>;

  constructor(ctx: EngineContext<R>) {
    this.#ctx = ctx;
    this.#sql = httpSql(ctx.o.quotedSchema);
    this.#claim = this.#sql.beginClaimAndRead(ctx.o.isolation, ctx.o.lockTimeoutMs);
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
      const results = (await stmt(
        conn.client.query(this.#claim(consumer, item.id, item.fpHex, retentionMs)),
      )) as unknown as QueryResultLike<HttpKeyRow>[];
      if (results[1]!.rowCount !== 1) {
        // The read is a statement after the claim: it sees the row that made the claim wait, or
        // nothing when its writer rolled back.
        const row = results[2]!.rows[0];
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
      const ended = (await stmt(conn.client.query(text))) as unknown as QueryResultLike[];
      conn.release();
      const commit = ended[ended.length - 1]!;
      if (commit.command === 'ROLLBACK') return await handlerFailed(ctx, item, rolledBackError());
      if (ended[ended.length - 2]!.rowCount !== 1) {
        // Only the handler's own SQL could have deleted the key's row: its writes committed
        // without the key. Loud, and not a 2xx.
        const error = keyRowGone(consumer, item.id);
        ctx.o.logger.error({ consumer, id: item.id }, error.message);
        return ctx.out.failed(item.envelope, item.id, 'permanent', error);
      }
      if (run.published && !response.undoWrites) ctx.o.outbox?.wake();
      return { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
    } catch (err) {
      return await afterStatementError(ctx, conn, item, err, started);
    }
  }

  /** The outcome of the row in the claim's way; a duplicate carries its stored response. */
  #ofRow(item: Item, row: HttpKeyRow): Outcome<R> {
    const ctx = this.#ctx;
    const outcome = outcomeOfRow(ctx.out, item, row, ctx.o.busyDelayMs);
    if (outcome.status !== 'duplicate') return outcome;
    return { ...outcome, result: responseOfRow(row) as R | undefined };
  }
}

function keyRowGone(consumer: string, id: string): OnceError {
  return new OnceError(
    ErrorCode.Database,
    `the key's row ${consumer}/${id} was deleted inside its own transaction (by the handler's SQL?): its writes committed without the key`,
  );
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
