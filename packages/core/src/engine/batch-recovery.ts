/**
 * How a batch that went wrong is finished. Owns one decision: after a handler failure or a
 * statement error, whether the batch is replayed with the failing message isolated, or run one
 * message per transaction.
 */

import type { Outcome } from '../message/outcome.js';
import { classifyDbError } from '../pg/sqlstate.js';
import type { EngineContext } from './context.js';
import { handlerFailed } from './failures.js';
import type { Item } from './item.js';
import { isStop } from './plan-runs.js';

/**
 * A handler failure in a batch that is not that handler's own doing alone: a deadlock or
 * serialization failure among the handlers' rows (the same batch would meet it again), or a
 * statement refused because an earlier statement of the transaction failed (25P02: some handler
 * before let a query fail and carried on).
 */
export function poisonsBatch(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return classifyDbError(error) === 'conflict-retry' || code === '25P02';
}

/** Runs each message in its own transaction, in order, stopping at the first stop. */
export async function oneByOne<R>(
  ctx: EngineContext<R>,
  items: readonly Item[],
  one: (item: Item) => Promise<Outcome<R>>,
): Promise<Outcome<R>[]> {
  const out: Outcome<R>[] = [];
  for (const item of items) {
    if (out.length > 0 && isStop(out[out.length - 1]!)) {
      out.push(ctx.out.notRun(item.envelope, item.id));
      continue;
    }
    out.push(await one(item));
  }
  return out;
}

/**
 * Optimistic replay after handler k of a batch failed and the batch was rolled back: the
 * prefix again as a batch, k classified alone (its work was rolled back; a permanent verdict
 * records it), then the rest as a batch.
 */
export async function replay<R>(
  ctx: EngineContext<R>,
  items: Item[],
  k: number,
  error: unknown,
  batch: (some: Item[]) => Promise<Outcome<R>[]>,
): Promise<Outcome<R>[]> {
  const notRun = (from: Item[]) => from.map((it) => ctx.out.notRun(it.envelope, it.id));
  const prefix = await batch(items.slice(0, k));
  if (prefix.some(isStop)) return [...prefix, ...notRun(items.slice(k))];
  const failing = await handlerFailed(ctx, items[k]!, error);
  if (isStop(failing)) return [...prefix, failing, ...notRun(items.slice(k + 1))];
  return [...prefix, failing, ...(await batch(items.slice(k + 1)))];
}
