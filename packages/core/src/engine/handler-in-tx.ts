/**
 * Runs the user's handler inside a message's open transaction and reports `handler:settled`.
 * Decides nothing: what the run comes to is the caller's (and the verdict's) to judge.
 */

import type { Connection } from '../connection.js';
import { serializeError } from '../errors.js';
import { type HandlerRun, runHandler } from '../run-handler.js';
import type { EngineContext } from './context.js';
import type { Item } from './item.js';

export function runInTx<R>(ctx: EngineContext<R>, conn: Connection, item: Item): Promise<HandlerRun<R>> {
  const o = ctx.o;
  const started = performance.now();
  const run = runHandler(
    {
      handler: o.handler,
      client: conn.client,
      id: item.id,
      consumer: o.consumer,
      timeoutMs: o.handlerTimeoutMs,
      storeResult: o.storeResult,
      outbox: o.outbox,
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
