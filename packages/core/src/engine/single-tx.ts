/**
 * One message in its own transaction. Owns one decision: the shape of that transaction, the same
 * for every claim: BEGIN and the claim in one round trip; if claimed, the handler, its stored
 * result and COMMIT; if not, the row that stood in the way.
 */

import type { HandlerRun } from '../handler/run-handler.js';
import type { Outcome } from '../message/outcome.js';
import { Connection } from '../pg/connection.js';
import { rolledBackError } from '../pg/transaction.js';
import type { EngineContext } from './context.js';
import { afterHandlerError, afterStatementError, handlerFailed } from './failures.js';
import { runInTx } from './handler-in-tx.js';
import type { Item } from './item.js';
import { isFresh } from './plan-runs.js';
import { type InboxRow, outcomeOfRow } from './stored-row.js';
import { lastResult, stmt } from './tx.js';

/** How many times one message's transaction runs when it keeps losing races (40P01, 40001). */
const RACE_RUNS = 3;

export class SingleTx<R> {
  readonly #ctx: EngineContext<R>;
  /** BEGIN, its settings and the claim, one simple query; the last result's rowCount is 1 when claimed. */
  readonly #beginAndClaim: (item: Item) => string;

  constructor(ctx: EngineContext<R>) {
    this.#ctx = ctx;
    const { o, sql } = ctx;
    const claim = sql.beginAndClaim(o.isolation, o.lockTimeoutMs);
    this.#beginAndClaim = (item) => claim(o.consumer, item.id, item.fpHex, o.retentionMs);
  }

  /**
   * Runs `item` in its own transaction. A deadlock or serialization failure among the handlers'
   * writes is a race lost, not a fault: the transaction runs again at once (a few times) instead
   * of going back to the broker, whose redelivery can take seconds (a visibility timeout, a long
   * poll) while the rows it raced for are long free.
   */
  async one(item: Item): Promise<Outcome<R>> {
    for (let run = 1; ; run++) {
      const o = await this.#run(item);
      if (run >= RACE_RUNS || o.status !== 'retry' || o.spent) return o;
      if (o.error.code !== '40P01' && o.error.code !== '40001') return o;
    }
  }

  async #run(item: Item): Promise<Outcome<R>> {
    const ctx = this.#ctx;
    const { pool, consumer } = ctx.o;
    if (!isFresh(item.envelope)) {
      // Duplicate short-cut: an autocommit read before any transaction. Only a committed row
      // is visible here, so a hit is certain; a miss proceeds to the real claim.
      try {
        const row = (await pool.query<InboxRow>(ctx.sql.readOne, [consumer, item.id])).rows[0];
        if (row) return outcomeOfRow(ctx.out, item, row, ctx.o.busyDelayMs);
      } catch {
        // The transaction below meets the same fault and classifies it.
      }
    }
    let conn: Connection;
    try {
      conn = await Connection.open(pool);
    } catch (err) {
      return ctx.out.unavailable(item.envelope, item.id, err);
    }
    let started = false;
    try {
      // One round trip: BEGIN, its settings and the claim (see sql/literal.ts).
      const claimed = lastResult(await stmt(conn.client.query(this.#beginAndClaim(item))));
      if (claimed.rowCount === 0) {
        const row = (await stmt(conn.client.query<InboxRow>(ctx.sql.readOne, [consumer, item.id]))).rows[0];
        await stmt(conn.client.query('ROLLBACK'));
        conn.release();
        // A new statement, so under READ COMMITTED it saw the rival that made us wait. No row: the
        // rival rolled back.
        return row
          ? outcomeOfRow(ctx.out, item, row, ctx.o.busyDelayMs)
          : ctx.out.retry(item.envelope, item.id, vanished(), false);
      }
      started = true;
      const run = await runInTx(ctx, conn.client, item);
      if (!run.ok) return await afterHandlerError(ctx, conn, item, run.error);
      // The claim inserted the row with a NULL result, so a null json (an undefined result) needs
      // no statement.
      if (ctx.o.storeResult && run.json !== null) {
        await stmt(conn.client.query(ctx.sql.storeResult, [consumer, item.id, run.json]));
      }
      return await this.#commit(conn, item, run);
    } catch (err) {
      return await afterStatementError(ctx, conn, item, err, started);
    }
  }

  /**
   * COMMIT of a single message. A COMMIT that answers ROLLBACK (a statement inside had failed and
   * the handler carried on) is the handler's failure; a COMMIT that throws is classified as any
   * statement error by the caller (a deferred constraint: the message's; a lost reply: retry, and
   * the claim decides on redelivery).
   */
  async #commit(conn: Connection, item: Item, run: HandlerRun<R> & { ok: true }): Promise<Outcome<R>> {
    const commit = await stmt(conn.client.query('COMMIT'));
    conn.release();
    if (commit.command === 'ROLLBACK') return await handlerFailed(this.#ctx, item, rolledBackError());
    if (run.published) this.#ctx.o.outbox?.wake();
    return { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
  }
}

export function vanished(): Error {
  return new Error('claim vanished: the row that made the claim wait was rolled back; run again');
}
