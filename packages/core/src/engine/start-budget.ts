/**
 * The killer budget (`ProcessOptions.starts`). Owns one decision: when a suspect's start is
 * counted, when it is refused, and when a count is taken back. A message that kills the process
 * never reaches a catch block, so its starts are counted in PostgreSQL, committed on their own
 * (note-start.ts) once the inbox has claimed the id and just before the handler runs: only a
 * start that reaches the handler counts, a redelivery that ends `duplicate` or `busy` spends
 * nothing. Past `maxAttempts` starts the handler is not run and the failure policy (verdict.ts,
 * told by `StartState.refused`) records the message `failed` (`max-attempts`).
 *
 * The state lives on the engine's item for one call, never on the envelope. In transactional
 * mode the count needs a second pool connection beside the message's transaction, so the wait is
 * bounded (a pool of one would wait forever) and the handler then runs uncounted, with a warning.
 */

import { AttemptsExhaustedError, serializeError } from '../errors.js';
import type { Handler } from '../handler/handler.js';
import type { Outcome } from '../message/outcome.js';
import type { EngineContext } from './context.js';
import type { Item, StartState } from './item.js';

/** Longest wait for a start count, in ms; past it the handler runs uncounted (with a warning). */
export const START_COUNT_WAIT_MS = 5_000;

/** The attempt the failure policy judges for `item`: the counted starts, or the delivered one. */
export function attemptOf(item: Item): number {
  return item.starts?.attempt ?? item.envelope.attempt;
}

/** The handler `item` runs: the call's or the inbox's, behind the start count for a suspect. */
export function handlerOf<R>(ctx: EngineContext<R>, item: Item): Handler<R> {
  const handler = (item.handler ?? ctx.o.handler) as Handler<R>;
  const s = item.starts;
  // Every fresh delivery goes straight to the handler: no promise of our own around it.
  return s === undefined ? handler : (envelope, hctx) => runCounted(ctx, item, s, handler, envelope, hctx);
}

async function runCounted<R>(
  ctx: EngineContext<R>,
  item: Item,
  s: StartState,
  handler: Handler<R>,
  ...[envelope, hctx]: Parameters<Handler<R>>
): Promise<R> {
  const once = s.budget.attemptIsStarts === true;
  // With attemptIsStarts a delivery is counted once however often this call runs it (a race lost
  // and run again); otherwise every run that reaches the handler is a start.
  if (!(once && s.counted)) {
    const starts = await count(ctx, item);
    if (starts !== undefined) {
      s.counted = true;
      if (once) s.attempt = starts;
      if (starts > ctx.o.maxAttempts) {
        s.refused = starts;
        s.budget.onExhausted?.(envelope, starts);
        throw new AttemptsExhaustedError(starts, ctx.o.maxAttempts);
      }
    }
  }
  // The handler's context is this run's own object: with attemptIsStarts it reads the attempt
  // judged, on every run of the call.
  if (s.attempt !== undefined) hctx.attempt = s.attempt;
  return handler(envelope, hctx);
}

/** The start count, or undefined (best effort: the database refused, or the wait ran out). */
async function count<R>(ctx: EngineContext<R>, item: Item): Promise<number | undefined> {
  const { logger, pool, consumer, retentionMs } = ctx.o;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => {
      logger.warn(
        { waitMs: START_COUNT_WAIT_MS },
        'once: could not count a start in time (is the pool smaller than 2?); running uncounted',
      );
      resolve(undefined);
    }, START_COUNT_WAIT_MS);
  });
  const counted = pool
    .query<{ starts: number }>(ctx.sql.noteStart, [consumer, item.id, retentionMs])
    .then((res) => res.rows[0]!.starts);
  try {
    return await Promise.race([counted, late]);
  } catch (err) {
    logger.debug({ error: serializeError(err).message }, 'once: could not count a start');
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * With `attemptIsStarts`: brings the count in line with how a run ended, before the outcome goes
 * back to the adapter (so a redelivery reads the new count). A fresh delivery (not counted before
 * it ran, to spare every message a round trip) whose retry is spent is counted now; a counted run
 * whose retry is not spent (a lost connection, a deadlock) is taken back, so such faults never push
 * a message towards `maxAttempts`. Best effort: a refusal is logged at debug level and the count
 * stays.
 */
export async function settleStarts<R>(ctx: EngineContext<R>, item: Item, outcome: Outcome<R>): Promise<void> {
  if (outcome.status !== 'retry') return;
  const { pool, consumer, retentionMs } = ctx.o;
  const s = item.starts;
  const counted = s?.counted === true;
  try {
    if (outcome.spent && !counted) await pool.query(ctx.sql.noteStart, [consumer, item.id, retentionMs]);
    else if (!outcome.spent && counted) {
      await pool.query(ctx.sql.forgetStart, [consumer, item.id]);
      s!.counted = false;
    }
  } catch (err) {
    ctx.o.logger.debug({ error: serializeError(err).message }, 'once: could not update a start count');
  }
}
