/**
 * Failure policy of the transactional path. Owns one decision: what outcome a failure of a
 * started message gets, from its verdict (verdict.ts decides whether it counts and whether it
 * ends the message; this module carries that out: `retry`, `busy`, `not-run` for a setup fault, or
 * a `failed` record).
 */

import { isEnvironmentVerdict, type Verdict, verdictOf } from '../handler/verdict.js';
import type { Outcome } from '../message/outcome.js';
import type { Connection } from '../pg/connection.js';
import { rollback } from '../pg/transaction.js';
import type { EngineContext } from './context.js';
import type { Item } from './item.js';
import { recordFailed } from './record-failure.js';
import { attemptOf } from './start-budget.js';
import { causeOf } from './tx.js';

/** Where a failure came from: the handler, or one of once's own statements. */
export type FailureSource = 'handler' | 'statement';

/** The verdict on `error` for `item`'s current attempt. */
export function verdictFor<R>(
  ctx: EngineContext<R>,
  item: Item,
  error: unknown,
  where: FailureSource,
): Verdict {
  return verdictOf(error, where, {
    attempt: attemptOf(item),
    maxAttempts: ctx.o.maxAttempts,
    refused: item.starts?.refused !== undefined,
    classify: ctx.out.classify,
    isolation: ctx.o.isolation,
  });
}

/** Carries out a verdict: the outcome, with a `failed` record written when it ends the message. */
export async function settleVerdict<R>(
  ctx: EngineContext<R>,
  item: Item,
  verdict: Verdict,
  error: unknown,
): Promise<Outcome<R>> {
  switch (verdict.kind) {
    case 'retry':
      return ctx.out.retry(item.envelope, item.id, error, verdict.spent, attemptOf(item));
    case 'busy':
      return ctx.out.busy(item.envelope, item.id, ctx.o.busyDelayMs);
    case 'unavailable':
      ctx.setupFault(error);
      return ctx.out.unavailable(item.envelope, item.id, error);
    case 'fail':
      return await recordFailed(ctx, item, verdict.reason, error);
  }
}

/** A handler failure, its work already undone: `retry`, or a `failed` row in its own transaction. */
export function handlerFailed<R>(ctx: EngineContext<R>, item: Item, error: unknown): Promise<Outcome<R>> {
  return settleVerdict(ctx, item, verdictFor(ctx, item, error, 'handler'), error);
}

/** The handler threw inside the transaction: undo its work, then record or retry. */
export async function afterHandlerError<R>(
  ctx: EngineContext<R>,
  conn: Connection,
  item: Item,
  error: unknown,
): Promise<Outcome<R>> {
  await rollback(conn, error);
  return handlerFailed(ctx, item, error);
}

/**
 * One of our own statements failed (claim, read, stored result, COMMIT): the transaction is
 * gone. `started`: the handler had been given the message. A fault before it started is never
 * the message's. A COMMIT whose outcome is unknown lands in `retry`: the claim decides on
 * redelivery.
 */
export async function afterStatementError<R>(
  ctx: EngineContext<R>,
  conn: Connection,
  item: Item,
  err: unknown,
  started: boolean,
): Promise<Outcome<R>> {
  const cause = causeOf(err);
  await rollback(conn, cause);
  const verdict = verdictFor(ctx, item, cause, 'statement');
  if (!started && verdict.kind === 'retry' && !verdict.spent) {
    return ctx.out.unavailable(item.envelope, item.id, cause);
  }
  return settleVerdict(ctx, item, verdict, cause);
}

/**
 * A statement of a batch failed (the claim, stored results, COMMIT): the transaction is gone.
 * A fault of the environment is every message's verdict, unspent; anything else (a deferred
 * constraint at COMMIT, a statement the handlers' work made fail) is some message's own doing:
 * `undefined` says to find it by running each message alone.
 */
export async function afterBatchStatementError<R>(
  ctx: EngineContext<R>,
  conn: Connection,
  items: readonly Item[],
  err: unknown,
  started: boolean,
): Promise<Outcome<R>[] | undefined> {
  const cause = causeOf(err);
  await rollback(conn, cause);
  const verdict = verdictFor(ctx, items[0]!, cause, 'statement');
  const out = ctx.out;
  if (verdict.kind === 'busy') return items.map((it) => out.busy(it.envelope, it.id, ctx.o.busyDelayMs));
  if (isEnvironmentVerdict(verdict)) {
    if (verdict.kind === 'unavailable') ctx.setupFault(cause);
    return items.map((it) =>
      started && verdict.kind === 'retry'
        ? out.retry(it.envelope, it.id, cause, false)
        : out.unavailable(it.envelope, it.id, cause),
    );
  }
  return undefined;
}
