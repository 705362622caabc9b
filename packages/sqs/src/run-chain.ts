import {
  type Envelope,
  type Inbox,
  type Logger,
  type Outcome,
  type SerializedError,
  serializeError,
} from '@once/core';
import type { Gate } from '@once/core/adapter';
import type { Held } from './held.js';
import type { Limiter } from './limiter.js';
import type { Settler } from './settler.js';

/** What running a chain needs from its consumer. */
export interface ChainContext<R> {
  inbox: Inbox<R>;
  limiter: Limiter;
  /**
   * Fresh messages run shared, a redelivered one exclusive, across the whole consumer: when a
   * redelivered message kills the process, nothing else was running, so only its own start count
   * (noted just before its handler ran) has risen.
   */
  gate: Gate;
  settler: Settler;
  /**
   * The consumer's count of real runs in Postgres (run-counter.ts): redelivered messages about to
   * run alone go in `alone`, and the guarded handler counts their starts once the inbox has
   * claimed them; `settled` brings the count in line with an outcome before it is settled.
   */
  runs: { alone: WeakSet<Envelope>; settled(outcome: Outcome<R>): Promise<void> };
  logger: Logger;
  /** Called once a held message needs nothing more from us. */
  forget: (e: Held) => void;
  /** Reports a fault that stops every message (core threw: schema missing or too new). */
  onFault: (error: SerializedError) => void;
}

/** One transaction per message, in the chain's (the group's) order; a retry sends the rest back behind it. */
export async function runChain<R>(ctx: ChainContext<R>, entries: Held[]): Promise<void> {
  try {
    await runEach(ctx, entries);
  } finally {
    ctx.settler.flush();
  }
}

async function runEach<R>(ctx: ChainContext<R>, entries: Held[]): Promise<void> {
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (e.capped) {
      // Held too long to start now; it and everything behind it come back in order.
      letGo(ctx, entries.slice(i));
      return;
    }
    const alone = e.envelope.redelivered;
    const leave = alone ? await ctx.gate.exclusive() : await ctx.gate.shared();
    const release = await ctx.limiter.acquire();
    let outcome: Outcome<R>;
    try {
      if (alone) ctx.runs.alone.add(e.envelope);
      outcome = await processOne(ctx, e.envelope);
    } finally {
      release();
      leave();
    }
    await ctx.runs.settled(outcome);
    const plan = await ctx.settler.settle(e, outcome);
    if (plan.kind === 'retry') {
      retryRest(ctx, entries.slice(i + 1), plan.delayMs);
      return;
    }
  }
}

/**
 * One transaction for a whole receive. Core stops a batch at the first retry and returns the
 * rest not run; only that message's group must wait, so the other groups' unrun messages go
 * straight into another transaction. A stop that ran nothing (the database is unreachable)
 * sends everything back.
 */
export async function runBatch<R>(ctx: ChainContext<R>, all: Held[]): Promise<void> {
  try {
    await runBatches(ctx, all);
  } finally {
    ctx.settler.flush();
  }
}

async function runBatches<R>(ctx: ChainContext<R>, all: Held[]): Promise<void> {
  const key = (e: Held) => e.group ?? e.receipt;
  const stopped = new Map<string, number>(); // group -> retry delay, ms
  for (const e of all) if (e.capped) stopped.set(key(e), 0);
  let remaining = all;
  while (remaining.length > 0) {
    const run: Held[] = [];
    for (const e of remaining) {
      const delay = stopped.get(key(e));
      if (delay === undefined) run.push(e);
      else if (e.capped) letGo(ctx, [e]);
      else retryRest(ctx, [e], delay);
    }
    if (run.length === 0) return;
    // Batches hold only fresh messages (planChains), so they share the gate.
    const leave = await ctx.gate.shared();
    const release = await ctx.limiter.acquire();
    let outcomes: Outcome<R>[];
    try {
      outcomes = await processMany(
        ctx,
        run.map((e) => e.envelope),
      );
    } finally {
      release();
      leave();
    }
    await Promise.all(outcomes.map((o) => ctx.runs.settled(o)));
    const again: Held[] = [];
    for (let k = 0; k < run.length; k++) {
      const e = run[k]!;
      const delay = stopped.get(key(e));
      if (delay !== undefined) {
        retryRest(ctx, [e], delay);
        continue;
      }
      // Not run only because another group's message stopped the batch: straight into the next.
      if (ctx.settler.planOf(outcomes[k]!).kind === 'rerun') {
        again.push(e);
        continue;
      }
      const plan = await ctx.settler.settle(e, outcomes[k]!);
      if (plan.kind === 'retry') stopped.set(key(e), plan.delayMs);
    }
    remaining = again;
  }
}

async function processOne<R>(ctx: ChainContext<R>, envelope: Envelope): Promise<Outcome<R>> {
  try {
    return await ctx.inbox.process(envelope);
  } catch (err) {
    return unprocessable(ctx, envelope, err);
  }
}

async function processMany<R>(ctx: ChainContext<R>, envelopes: Envelope[]): Promise<Outcome<R>[]> {
  try {
    return await ctx.inbox.processBatch(envelopes);
  } catch (err) {
    return envelopes.map((e) => unprocessable(ctx, e, err));
  }
}

/** Core throws only for configuration faults (schema missing or too new): retry later, loudly. */
function unprocessable<R>(ctx: ChainContext<R>, envelope: Envelope, err: unknown): Outcome<R> {
  const error = serializeError(err);
  ctx.onFault(error);
  ctx.logger.error('once/sqs: cannot process messages', { error: error.message });
  const delayMs = ctx.inbox.options.retryDelayMs(Math.max(1, envelope.attempt));
  return { status: 'not-run', id: envelope.id, envelope, why: 'unavailable', error, delayMs };
}

/** Later messages of a group whose earlier one must be retried: back after it, in order. */
function retryRest<R>(ctx: ChainContext<R>, entries: Held[], delayMs: number): void {
  for (const e of entries) ctx.settler.delay(e, delayMs, 'retry');
}

/** Capped messages are left to expire; what follows them in their group is released now. */
function letGo<R>(ctx: ChainContext<R>, entries: Held[]): void {
  for (const e of entries) {
    e.settling = true;
    if (e.capped) ctx.forget(e);
    else ctx.settler.delay(e, 0, 'release');
  }
}
