/**
 * Many fresh messages in one inbox transaction. Owns one decision: the batch invariant, that the
 * committed batch holds claims only for messages that were processed in it or recorded failed; a
 * message that did not run, or whose work was rolled back, leaves no claim behind. The claim for
 * the whole batch is one statement with the ids sorted, so overlapping batches lock in one order.
 */

import { DeadlineError } from '../errors.js';
import { type FingerprintHex, hexBytes } from '../message/fingerprint.js';
import type { Outcome } from '../message/outcome.js';
import { Connection } from '../pg/connection.js';
import { classifyDbError } from '../pg/sqlstate.js';
import { rollback } from '../pg/transaction.js';
import type { BatchPause } from './batch-pause.js';
import { oneByOne, poisonsBatch, replay } from './batch-recovery.js';
import type { EngineContext } from './context.js';
import { afterBatchStatementError, verdictFor } from './failures.js';
import { runInTx } from './handler-in-tx.js';
import { fingerprintOf, type Item } from './item.js';
import { isStop } from './plan-runs.js';
import { markFailedInTx } from './record-failure.js';
import { vanished } from './single-tx.js';
import { type InboxRow, outcomeOfRow } from './stored-row.js';
import { lastResult, StatementError, stmt } from './tx.js';

export class BatchTx<R> {
  readonly #ctx: EngineContext<R>;
  readonly #one: (item: Item) => Promise<Outcome<R>>;
  readonly #pause: BatchPause;
  readonly #beginAndClaim: ReturnType<EngineContext<R>['sql']['beginAndClaimMany']>;

  constructor(ctx: EngineContext<R>, one: (item: Item) => Promise<Outcome<R>>, pause: BatchPause) {
    this.#ctx = ctx;
    this.#one = one;
    this.#pause = pause;
    this.#beginAndClaim = ctx.sql.beginAndClaimMany(ctx.o.isolation, ctx.o.lockTimeoutMs);
  }

  /** Runs `all` (fresh, in order) in one transaction; repeats of an id follow the first copy's fate. */
  async run(all: Item[]): Promise<Outcome<R>[]> {
    const firstIndex = new Map<string, number>();
    const unique: Item[] = [];
    for (const item of all) {
      if (!firstIndex.has(item.id)) {
        firstIndex.set(item.id, unique.length);
        unique.push(item);
      }
    }
    const uniqueOutcomes = await this.#unique(unique);
    // Every id once (the usual batch): the outcomes are already in input order.
    if (unique.length === all.length) return uniqueOutcomes;
    const seen = new Set<string>();
    return all.map((item) => {
      const first = uniqueOutcomes[firstIndex.get(item.id)!]!;
      if (!seen.has(item.id)) {
        seen.add(item.id);
        return first;
      }
      return this.#repeatOf(item, first);
    });
  }

  #repeatOf(item: Item, first: Outcome<R>): Outcome<R> {
    const { o, out } = this.#ctx;
    if (first.status === 'processed' || first.status === 'duplicate') {
      const row = {
        status: 'done',
        fingerprint: hexBytes(fingerprintOf(first.envelope, o)),
        result: first.result,
      } as const;
      return outcomeOfRow(out, item, row, o.busyDelayMs);
    }
    if (first.status === 'failed')
      return out.failed(item.envelope, item.id, 'previously-failed', first.error);
    if (first.status === 'conflict') return { ...first, envelope: item.envelope };
    if (first.status === 'busy') return { ...first, envelope: item.envelope };
    if (first.status === 'not-run') return { ...first, id: item.id, envelope: item.envelope };
    // The first copy failed transiently: this one never ran, and goes when the first does.
    return out.notRun(item.envelope, item.id);
  }

  async #unique(items: Item[]): Promise<Outcome<R>[]> {
    if (items.length === 0) return [];
    if (items.length === 1) return [await this.#one(items[0]!)];
    const ctx = this.#ctx;
    const { o, sql, out } = ctx;
    const { pool, consumer, retentionMs } = o;
    let conn: Connection;
    try {
      conn = await Connection.open(pool);
    } catch (err) {
      return items.map((it) => out.unavailable(it.envelope, it.id, err));
    }
    const outcomes: (Outcome<R> | undefined)[] = new Array(items.length);
    let started = false;
    try {
      const sorted = items.slice().sort(byId);
      const ids = new Array<string>(sorted.length);
      const fps = new Array<FingerprintHex>(sorted.length);
      for (let k = 0; k < sorted.length; k++) {
        ids[k] = sorted[k]!.id;
        fps[k] = sorted[k]!.fpHex;
      }
      let claimedRows: { message_id: string }[];
      try {
        // One round trip: BEGIN and the sorted claim, its settings pinned (see sql/inbox.ts).
        const text = this.#beginAndClaim(consumer, ids, fps, retentionMs);
        claimedRows = lastResult<{ message_id: string }>(await conn.client.query(text)).rows;
      } catch (err) {
        if (classifyDbError(err) !== 'busy') throw new StatementError(err);
        // A rival holds one of the ids past the wait bound: claim one by one instead, so the
        // others need not wait for it.
        await rollback(conn, err);
        return await oneByOne(ctx, items, this.#one);
      }
      const claimed = new Set<string>();
      for (const r of claimedRows) claimed.add(r.message_id);
      // The ids are distinct here: as many claimed as items means all of them.
      const unclaimed = claimed.size === items.length ? [] : ids.filter((id) => !claimed.has(id));
      if (unclaimed.length > 0) {
        const rows = (await stmt(conn.client.query<InboxRow>(sql.readMany, [consumer, unclaimed]))).rows;
        const byId = new Map(rows.map((r) => [r.message_id, r]));
        items.forEach((item, k) => {
          if (claimed.has(item.id)) return;
          const row = byId.get(item.id);
          outcomes[k] = row
            ? outcomeOfRow(out, item, row, o.busyDelayMs)
            : out.retry(item.envelope, item.id, vanished(), false);
        });
      }
      started = true;
      const results: { id: string; json: string | null }[] = [];
      let published = false;
      const savepoints = o.batchMode === 'savepoint';
      for (let k = 0; k < items.length; k++) {
        const item = items[k]!;
        if (!claimed.has(item.id)) continue;
        if (savepoints) await stmt(conn.client.query('SAVEPOINT once_message'));
        const run = await runInTx(ctx, conn.client, item);
        if (run.ok) {
          if (savepoints) await stmt(conn.client.query('RELEASE SAVEPOINT once_message'));
          outcomes[k] = { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
          published ||= run.published;
          // The claim inserted this row with a NULL result: a null json has nothing to store.
          if (o.storeResult && run.json !== null) results.push({ id: item.id, json: run.json });
          continue;
        }
        if (poisonsBatch(run.error)) {
          this.#pause.note(run.error);
          // Not this handler's own doing alone (a deadlock on the handlers' rows, a transaction an
          // earlier handler let fail): the same batch would meet it again. One message per
          // transaction, at once.
          await rollback(conn, run.error);
          return await oneByOne(ctx, items, this.#one);
        }
        if (!savepoints || run.error instanceof DeadlineError || conn.error) {
          // Optimistic: roll everything back and replay with the failing message isolated.
          await rollback(conn, run.error);
          return await replay(ctx, items, k, run.error, (some) => this.#unique(some));
        }
        await stmt(conn.client.query('ROLLBACK TO SAVEPOINT once_message'));
        const verdict = await this.#savepointFailure(conn, item, run.error);
        outcomes[k] = verdict;
        if (isStop(verdict)) {
          // Unclaim this message and every later claimed one that has not run.
          const unrun = items
            .slice(k)
            .filter((i) => claimed.has(i.id))
            .map((i) => i.id);
          await stmt(conn.client.query(sql.unclaim, [consumer, unrun]));
          for (let j = k + 1; j < items.length; j++) {
            const later = items[j]!;
            if (claimed.has(later.id) || !outcomes[j]) outcomes[j] = out.notRun(later.envelope, later.id);
          }
          break;
        }
      }
      if (results.length > 0) {
        await stmt(
          conn.client.query(sql.storeResults, [
            consumer,
            results.map((r) => r.id),
            results.map((r) => r.json),
          ]),
        );
      }
      const commit = await stmt(conn.client.query('COMMIT'));
      conn.release();
      // COMMIT answered ROLLBACK: some handler let a statement fail and carried on. Which one is
      // found by running each alone.
      if (commit.command === 'ROLLBACK') return await oneByOne(ctx, items, this.#one);
      if (published) o.outbox?.wake();
      for (let k = 0; k < items.length; k++) outcomes[k] ??= out.notRun(items[k]!.envelope, items[k]!.id);
      return outcomes as Outcome<R>[];
    } catch (err) {
      return (
        (await afterBatchStatementError(ctx, conn, items, err, started)) ??
        (await oneByOne(ctx, items, this.#one))
      );
    }
  }

  /**
   * Savepoint mode: the handler's work is undone, its claim is still held. A permanent failure
   * turns the claim into a failed record; a transient one returns `retry` (the caller unclaims).
   */
  async #savepointFailure(conn: Connection, item: Item, error: unknown): Promise<Outcome<R>> {
    const ctx = this.#ctx;
    const verdict = verdictFor(ctx, item, error, 'handler');
    if (verdict.kind === 'fail') return markFailedInTx(ctx, conn, item, verdict.reason, error);
    return verdict.kind === 'retry'
      ? ctx.out.retry(item.envelope, item.id, error, verdict.spent)
      : ctx.out.unavailable(item.envelope, item.id, error);
  }
}

function byId(a: Item, b: Item): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
