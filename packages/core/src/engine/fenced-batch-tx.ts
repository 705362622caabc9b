/**
 * Fresh fenced messages of one partition, in rising offset order, in one transaction. Owns one
 * decision: how a batch moves a partition's fence. It locks the fence, takes what lies below it
 * for duplicates (or `failed` again, where a failure was recorded), runs the rest and moves the
 * fence past the last. No inbox row is written. A handler failure rolls it all back (optimistic,
 * as in the inbox batch): the prefix runs again as a batch, the failing message is classified
 * alone (a permanent failure moves the fence past it), then the rest.
 */

import { Connection } from '../connection.js';
import { hexBytes } from '../fingerprint.js';
import type { Outcome } from '../outcome.js';
import type { BatchPause } from './batch-pause.js';
import { oneByOne, poisonsBatch, replay } from './batch-recovery.js';
import type { EngineContext } from './context.js';
import { afterBatchStatementError } from './failures.js';
import { runInTx } from './handler-in-tx.js';
import type { Item } from './item.js';
import { type InboxRow, outcomeOfRow } from './stored-row.js';
import { lastResult, rollback, stmt } from './tx.js';

export class FencedBatchTx<R> {
  readonly #ctx: EngineContext<R>;
  readonly #one: (item: Item) => Promise<Outcome<R>>;
  readonly #pause: BatchPause;
  readonly #beginAndLock: (consumer: string, stream: string, partition: number, first: bigint) => string;

  constructor(ctx: EngineContext<R>, one: (item: Item) => Promise<Outcome<R>>, pause: BatchPause) {
    this.#ctx = ctx;
    this.#one = one;
    this.#pause = pause;
    this.#beginAndLock = ctx.fenceSql.beginAndLockFence(ctx.o.isolation, ctx.o.lockTimeoutMs);
  }

  /** Runs `items` (fresh, one partition, offsets rising) in one transaction. */
  async run(items: Item[]): Promise<Outcome<R>[]> {
    if (items.length === 0) return [];
    if (items.length === 1) return [await this.#one(items[0]!)];
    const ctx = this.#ctx;
    const { o, out } = ctx;
    const { pool, consumer } = o;
    const fence = items[0]!.fence!;
    let conn: Connection;
    try {
      conn = await Connection.open(pool);
    } catch (err) {
      return items.map((it) => out.unavailable(it.envelope, it.id, err));
    }
    const outcomes: Outcome<R>[] = new Array(items.length);
    let started = false;
    try {
      const locked = lastResult<{ next_offset: string }>(
        await stmt(
          conn.client.query(this.#beginAndLock(consumer, fence.stream, fence.partition, fence.offset)),
        ),
      );
      const next = BigInt(locked.rows[0]!.next_offset);
      const below = items.filter((it) => it.fence!.offset < next);
      if (below.length > 0) {
        const rows = (
          await stmt(conn.client.query<InboxRow>(ctx.sql.readMany, [consumer, below.map((it) => it.id)]))
        ).rows;
        const failed = new Map(rows.filter((r) => r.status === 'failed').map((r) => [r.message_id, r]));
        items.forEach((it, k) => {
          if (it.fence!.offset >= next) return;
          const row = failed.get(it.id);
          outcomes[k] = row
            ? outcomeOfRow(out, it, row, o.busyDelayMs)
            : { status: 'duplicate', id: it.id, envelope: it.envelope, result: undefined };
        });
      }
      started = true;
      let published = false;
      let last: Item | undefined;
      for (let k = 0; k < items.length; k++) {
        if (outcomes[k]) continue;
        const item = items[k]!;
        const run = await runInTx(ctx, conn.client, item);
        if (!run.ok) {
          await rollback(conn, run.error);
          if (poisonsBatch(run.error)) {
            this.#pause.note(run.error);
            return await oneByOne(ctx, items, this.#one);
          }
          return await replay(ctx, items, k, run.error, (some) => this.run(some));
        }
        outcomes[k] = { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
        published ||= run.published;
        last = item;
      }
      if (last === undefined) {
        await stmt(conn.client.query('ROLLBACK'));
        conn.release();
        return outcomes;
      }
      await stmt(
        conn.client.query(ctx.fenceSql.advance, [
          consumer,
          fence.stream,
          fence.partition,
          (last.fence!.offset + 1n).toString(),
          last.id,
          hexBytes(last.fpHex),
        ]),
      );
      const commit = await stmt(conn.client.query('COMMIT'));
      conn.release();
      if (commit.command === 'ROLLBACK') return await oneByOne(ctx, items, this.#one);
      if (published) o.outbox?.wake();
      return outcomes;
    } catch (err) {
      return (
        (await afterBatchStatementError(ctx, conn, items, err, started)) ??
        (await oneByOne(ctx, items, this.#one))
      );
    }
  }
}
