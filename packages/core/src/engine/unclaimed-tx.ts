/**
 * A handler's transaction that claims nothing: `@once/http`'s requests without a key. Owns one
 * decision: the shape of that transaction, which is a message transaction's without the claim.
 * BEGIN and its settings (synchronous_commit on, the lock timeout, the isolation level) in one
 * round trip; the handler under its deadline with a `ctx.tx` revoked when it settles; COMMIT only
 * when `keep` says so, and a COMMIT that PostgreSQL answers with ROLLBACK is a failure, never a
 * success. A connection in doubt (past the deadline, COMMIT threw, a dead socket) is destroyed.
 * Nothing is recorded, so nothing decides whether it ran before: the caller runs it every time.
 */

import type { Handler } from '../handler/handler.js';
import { runHandler } from '../handler/run-handler.js';
import type { Envelope } from '../message/envelope.js';
import { Connection } from '../pg/connection.js';
import { classifyDbError } from '../pg/sqlstate.js';
import { rollback, rolledBackError } from '../pg/transaction.js';
import { inboxSql } from '../sql/inbox.js';
import type { ResolvedInboxOptions } from './options.js';

/** How a transaction without a claim ended. */
export type UnclaimedOutcome<R> =
  /** The handler's writes and outbox rows committed. */
  | {
      /** How the transaction ended: committed. */
      readonly status: 'committed';
      /** What the handler returned. */
      readonly result: R;
    }
  /** The handler resolved, `keep` said no: its writes rolled back. */
  | {
      /** How the transaction ended: rolled back because `keep` refused the result. */
      readonly status: 'rolled-back';
      /** What the handler returned, which `keep` refused. */
      readonly result: R;
    }
  /**
   * The handler threw or ran past its deadline, or COMMIT did not commit. `inDoubt`: COMMIT threw,
   * so whether it committed is unknown (a lost connection); otherwise nothing was written.
   */
  | {
      /** How the transaction ended: failed. */
      readonly status: 'failed';
      /** What the handler, the deadline or COMMIT threw. */
      readonly error: unknown;
      /** True when COMMIT itself threw, so whether the writes committed is unknown. */
      readonly inDoubt: boolean;
    }
  /** No connection, or BEGIN failed: the handler never started. */
  | {
      /** How the transaction ended: it never began. */
      readonly status: 'not-run';
      /** Why: the connection or BEGIN error. */
      readonly error: unknown;
    };

/** Runs handlers in once's transaction without a claim, with an inbox's settings. */
export class UnclaimedTx {
  readonly #o: ResolvedInboxOptions<unknown>;
  readonly #begin: string;

  /** `o`: the inbox's resolved options (`inbox.options`): pool, settings, deadline and outbox. */
  constructor(o: ResolvedInboxOptions<unknown>) {
    this.#o = o;
    this.#begin = inboxSql(o.quotedSchema).begin(o.isolation, o.lockTimeoutMs);
  }

  /**
   * Runs `handler(envelope, ctx)` in a new transaction and commits its writes when `keep(result)`
   * is true. `ctx.step` throws (nothing to record steps under). Never rejects.
   */
  async run<R>(
    handler: Handler<R>,
    envelope: Envelope,
    keep: (result: R) => boolean,
  ): Promise<UnclaimedOutcome<R>> {
    const o = this.#o;
    let conn: Connection;
    try {
      conn = await Connection.open(o.pool);
    } catch (error) {
      return { status: 'not-run', error };
    }
    try {
      await conn.client.query(this.#begin);
    } catch (error) {
      conn.destroy(error);
      return { status: 'not-run', error };
    }
    const run = await runHandler(
      {
        handler,
        client: conn.client,
        id: envelope.id ?? '',
        consumer: o.consumer,
        timeoutMs: o.handlerTimeoutMs,
        storeResult: false,
        outbox: o.outbox,
      },
      envelope,
    );
    let kept: boolean;
    try {
      if (!run.ok) throw run.error;
      kept = keep(run.result);
    } catch (error) {
      await rollback(conn, error);
      return { status: 'failed', error, inDoubt: false };
    }
    if (!kept) {
      await rollback(conn, undefined);
      return { status: 'rolled-back', result: run.result };
    }
    let command: string | undefined;
    try {
      command = (await conn.client.query('COMMIT')).command;
    } catch (error) {
      // A deferred constraint (rolled back) or a lost connection (unknown): closed either way.
      conn.destroy(error);
      return { status: 'failed', error, inDoubt: classifyDbError(error) === 'connection' };
    }
    conn.release();
    if (command === 'ROLLBACK') return { status: 'failed', error: rolledBackError(), inDoubt: false };
    if (run.published) o.outbox?.wake();
    return { status: 'committed', result: run.result };
  }
}
