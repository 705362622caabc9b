import type { Inbox, Logger, Outcome } from '@once/core';
import { type Gate, type Limiter, processGroup, runsAlone, type StartBudgets } from '@once/core/adapter';
import type { Held } from './held.js';
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
   * The killer budget's call options (counting starts as attempts): the inbox counts the start of
   * a redelivered message that runs alone once it has claimed it, and brings the count in line
   * with an outcome before handing it back.
   */
  starts: StartBudgets<R>;
  logger: Logger;
  /** Called once a held message needs nothing more from us. */
  forget: (e: Held) => void;
  /** Records an error the consumer handled itself (the inbox threw, which it never should). */
  noteError: (where: string, err: unknown) => void;
}

/** One transaction per message, in the chain's (the group's) order; a retry sends the rest back behind it. */
export async function runChain<R>(ctx: ChainContext<R>, entries: Held[]): Promise<void> {
  // A FIFO group's acks are deleted together when its chain ends, in one call as a hand-written
  // consumer deletes a receive: SQS keeps the group locked until the last of them is deleted, so
  // deleting the first ones sooner frees nothing, and each call is a signed HTTP round trip (with
  // the linger, a chain longer than `settleLingerMs` was deleted in two calls or more). Each is
  // still deleted only after its own commit. A standard queue's chains delete as they go.
  const acks = entries.length > 1 && entries[0]!.group !== undefined ? [] : undefined;
  try {
    await runEach(ctx, entries, acks);
  } finally {
    if (acks && acks.length > 0) ctx.settler.deleteAll(acks);
    ctx.settler.flush();
  }
}

async function runEach<R>(ctx: ChainContext<R>, entries: Held[], acks: Held[] | undefined): Promise<void> {
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (e.capped) {
      // Held too long to start now; it and everything behind it come back in order.
      letGo(ctx, entries.slice(i));
      return;
    }
    let outcome: Outcome<R> | undefined;
    try {
      const { envelope } = e;
      [outcome] = await processGroup(ctx, [envelope], runsAlone(envelope.redelivered, envelope.attempt));
    } catch (err) {
      ctx.noteError('inbox', err);
    }
    if (!outcome) {
      faultRest(ctx, entries.slice(i));
      return;
    }
    const plan = ctx.settler.planOf(outcome);
    const sent = ctx.settler.settle(e, plan, acks);
    if (sent) await sent;
    if (plan.kind === 'retry') {
      // The rest of the group never reached the inbox: it reports them not run, then they go back.
      const rest = entries.slice(i + 1);
      ctx.inbox.notRun(rest.map((r) => r.envelope));
      retryRest(ctx, rest, plan.delayMs);
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
    // Batches hold only fresh messages (planChains), so they share the gate. processBatch of one
    // message is process: one transaction either way.
    let outcomes: Outcome<R>[] | undefined;
    try {
      const envelopes = run.map((e) => e.envelope);
      outcomes = await processGroup(ctx, envelopes, false);
    } catch (err) {
      ctx.noteError('inbox', err);
    }
    if (!outcomes) {
      faultRest(ctx, run);
      return;
    }
    const plans = outcomes.map((o) => ctx.settler.planOf(o));
    const again: Held[] = [];
    for (let k = 0; k < run.length; k++) {
      const e = run[k]!;
      const plan = plans[k]!;
      const delay = stopped.get(key(e));
      if (delay !== undefined) {
        retryRest(ctx, [e], delay);
        continue;
      }
      // Not run only because another group's message stopped the batch: straight into the next.
      if (plan.kind === 'rerun') {
        again.push(e);
        continue;
      }
      const sent = ctx.settler.settle(e, plan);
      if (sent) await sent;
      if (plan.kind === 'retry') stopped.set(key(e), plan.delayMs);
    }
    remaining = again;
  }
}

// Core never throws for a message's sake (a database or schema fault is a `not-run` outcome it
// emits itself); a throw is a bug, reported, and the messages go back to the queue unchanged.

/** Messages the inbox could not take (it threw): back to the queue after core's retry delay. */
function faultRest<R>(ctx: ChainContext<R>, entries: Held[]): void {
  ctx.logger.error({ count: entries.length }, 'once/sqs: the inbox threw; the messages go back to the queue');
  for (const e of entries)
    ctx.settler.delay(e, ctx.inbox.options.retryDelayMs(Math.max(1, e.envelope.attempt)), 'retry');
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
