/**
 * One message in a transaction the caller's data library owns (`options.transactions`). Owns one
 * decision: the shape of that transaction, as {@link SingleTx} does for once's own: inside the
 * library's `run`, the claim (its settings pinned in the same statement), the handler, its stored result; the outcome is
 * `processed` only after `run` resolved, that is after the library's COMMIT resolved. Anything
 * that ends the body early (no claim, a handler failure, the deadline) rejects it, so the library
 * rolls back the claim with the handler's writes.
 */

import type { HandlerRun } from '../handler/run-handler.js';
import { hexBytes } from '../message/fingerprint.js';
import type { Outcome } from '../message/outcome.js';
import { type CallerTransactions, withSqlstate } from '../pg/caller-transactions.js';
import type { PgClientLike, QueryConfigLike, QueryResultLike } from '../pg/pg-like.js';
import type { EngineContext } from './context.js';
import { handlerFailed, settleVerdict, verdictFor } from './failures.js';
import { runInTx } from './handler-in-tx.js';
import type { Item } from './item.js';
import { isFresh } from './plan-runs.js';
import { vanished } from './single-tx.js';
import { type InboxRow, outcomeOfRow } from './stored-row.js';
import { causeOf, stmt } from './tx.js';

/** The body ended without a claim: `row` stood in the way (read after the rollback). */
class NotClaimed extends Error {
  constructor() {
    super('not claimed');
  }
}

/** The handler failed: the library rolls back, then the failure policy decides. */
class HandlerFailed extends Error {
  constructor(readonly error: unknown) {
    super('handler failed');
  }
}

export class OwnedTx<R> {
  readonly #ctx: EngineContext<R>;
  readonly #owner: CallerTransactions;
  readonly #claim: string;

  constructor(ctx: EngineContext<R>, owner: CallerTransactions) {
    this.#ctx = ctx;
    this.#owner = owner;
    this.#claim = ctx.sql.claimOwned;
  }

  async one(item: Item): Promise<Outcome<R>> {
    const ctx = this.#ctx;
    const { pool, consumer, lockTimeoutMs, retentionMs, handlerTimeoutMs } = ctx.o;
    const readRow = async (): Promise<InboxRow | undefined> =>
      (await pool.query<InboxRow>(ctx.sql.readOne, [consumer, item.id])).rows[0];
    if (!isFresh(item.envelope)) {
      // Duplicate short-cut, as in SingleTx: only a committed row is visible here.
      try {
        const row = await readRow();
        if (row) return outcomeOfRow(ctx.out, item, row, ctx.o.busyDelayMs);
      } catch {
        // The transaction below meets the same fault and classifies it.
      }
    }
    const owner = this.#owner;
    let started = false;
    let run: HandlerRun<R> & { ok: true };
    try {
      run = await owner.run(
        async (tx) => {
          const q = (text: string, values: unknown[]) => stmt(owner.query(tx, text, values));
          const claimed = await q(this.#claim, [
            consumer,
            item.id,
            hexBytes(item.fpHex),
            retentionMs,
            String(Math.floor(lockTimeoutMs)),
          ]);
          if (claimed.rows.length === 0) throw new NotClaimed();
          started = true;
          const result = await runInTx(ctx, clientOver(owner, tx), item, tx);
          if (!result.ok) throw new HandlerFailed(result.error);
          // The claim inserted the row with a NULL result: nothing to store for a null json.
          if (ctx.o.storeResult && result.json !== null)
            await q(ctx.sql.storeResult, [consumer, item.id, result.json]);
          return result;
        },
        { timeoutMs: handlerTimeoutMs },
      );
    } catch (err) {
      return await this.#failed(item, err, started, readRow);
    }
    if (run.published) ctx.o.outbox?.wake();
    return { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
  }

  async #failed(
    item: Item,
    err: unknown,
    started: boolean,
    readRow: () => Promise<InboxRow | undefined>,
  ): Promise<Outcome<R>> {
    const ctx = this.#ctx;
    if (err instanceof NotClaimed) {
      // Read after the rollback: under READ COMMITTED it sees the rival that made the claim wait.
      // No row: the rival rolled back.
      let row: InboxRow | undefined;
      try {
        row = await readRow();
      } catch (readErr) {
        return ctx.out.unavailable(item.envelope, item.id, readErr);
      }
      return row
        ? outcomeOfRow(ctx.out, item, row, ctx.o.busyDelayMs)
        : ctx.out.retry(item.envelope, item.id, vanished(), false);
    }
    if (err instanceof HandlerFailed) return handlerFailed(ctx, item, withSqlstate(this.#owner, err.error));
    // One of our statements failed, or the library's BEGIN or COMMIT did: the transaction is gone.
    // A COMMIT whose outcome is unknown lands in `retry`; the claim decides on redelivery.
    const cause = withSqlstate(this.#owner, causeOf(err));
    const verdict = verdictFor(ctx, item, cause, 'statement');
    if (!started && verdict.kind === 'retry' && !verdict.spent) {
      return ctx.out.unavailable(item.envelope, item.id, cause);
    }
    return settleVerdict(ctx, item, verdict, cause);
  }
}

/** `ctx.tx` over the library's transaction: raw SQL through its call, revoked at settle by the handle. */
function clientOver(owner: CallerTransactions, tx: unknown): PgClientLike {
  return {
    query<T>(text: string | QueryConfigLike, values?: unknown[]): Promise<QueryResultLike<T>> {
      const config = typeof text === 'string' ? { text, values } : text;
      return owner.query(tx, config.text, [...(values ?? config.values ?? [])]) as Promise<
        QueryResultLike<T>
      >;
    },
    release() {},
  };
}
