import { ErrorCode, OnceError, type Tx } from '@once/core';
import type { IdempotentContext } from './types.js';

/** A route's context that stops working when the route has answered. */
export interface EndableContext {
  /** What the route's handler gets in place of the engine's context. */
  readonly ctx: IdempotentContext;
  /** Ends the route: from now on `ctx.tx`, `ctx.publish` and `ctx.step` reject. Idempotent. */
  end(): void;
}

/**
 * Wraps the engine's context so that the route's writes end where the binding says the route
 * ended: at the response (Express's `res.end`, a Fetch handler's return) or at the handler's end
 * (Fastify). A statement issued later would otherwise race the key's COMMIT and land on one side
 * of it or the other, so that of two writes after the response the first could commit with the
 * key and the second fail while every retry replays the stored answer. Refused here instead, with
 * core's `TX_REVOKED`, before anything reaches PostgreSQL: such writes fail whole, never half.
 */
export function endableContext(inner: IdempotentContext, where: string): EndableContext {
  let ended = false;
  const refused = () =>
    new OnceError(
      ErrorCode.TxRevoked,
      `ctx.tx was used after the route answered (${where}): the response is the end of the route's writes; issue and await every write before answering`,
    );
  const tx: Tx = {
    query: ((text: Parameters<Tx['query']>[0], values?: unknown[]) =>
      ended ? Promise.reject(refused()) : inner.tx.query(text as unknown as string, values)) as Tx['query'],
  };
  const ctx: IdempotentContext = {
    tx,
    publish: (destination, body, options) =>
      ended ? Promise.reject(refused()) : inner.publish(destination, body, options),
    step: (name, fn) => (ended ? Promise.reject(refused()) : inner.step(name, fn)),
    idempotencyKey: (step) => inner.idempotencyKey(step),
    key: inner.key,
    scope: inner.scope,
    attempt: inner.attempt,
    signal: inner.signal,
  };
  return {
    ctx,
    end: () => {
      ended = true;
    },
  };
}
