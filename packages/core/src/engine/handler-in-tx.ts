/**
 * Runs the user's handler inside a message's open transaction and reports `handler:settled`.
 * Decides nothing: what the run comes to is the caller's (and the verdict's) to judge.
 */

import { serializeError } from '../errors.js';
import { type HandlerRun, runHandler } from '../handler/run-handler.js';
import type { PgClientLike } from '../pg/pg-like.js';
import type { EngineContext } from './context.js';
import type { Item } from './item.js';
import { handlerOf } from './start-budget.js';

/**
 * `client` runs `ctx.tx`'s queries; `transaction` is a caller-owned transaction object, handed on
 * as `ctx.transaction` (options.transactions).
 */
export function runInTx<R>(
  ctx: EngineContext<R>,
  client: PgClientLike,
  item: Item,
  transaction?: unknown,
): Promise<HandlerRun<R>> {
  const o = ctx.o;
  const started = performance.now();
  const run = runHandler(
    {
      handler: handlerOf(ctx, item),
      client,
      id: item.id,
      consumer: o.consumer,
      timeoutMs: o.handlerTimeoutMs,
      storeResult: o.storeResult,
      outbox: o.outbox,
      // runHandler sets ctx.transaction only when this is defined.
      transaction,
    },
    item.envelope,
  );
  // The event is built only when someone listens.
  return ctx.events.has('handler:settled') ? run.then((r) => settled(ctx, item, r, started)) : run;
}

function settled<R>(ctx: EngineContext<R>, item: Item, run: HandlerRun<R>, started: number): HandlerRun<R> {
  ctx.events.emit('handler:settled', {
    consumer: ctx.o.consumer,
    id: item.id,
    source: item.envelope.source,
    durationMs: performance.now() - started,
    error: run.ok ? undefined : serializeError(run.error),
  });
  return run;
}
