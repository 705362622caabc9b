import type { ResolvedInboxOptions } from '../engine/options.js';
import { runsAlone } from '../engine/plan-runs.js';
import type { Inbox } from '../inbox.js';
import type { Envelope } from '../message/envelope.js';
import type { Outcome } from '../message/outcome.js';
import type { StartBudgets } from './consumer-base.js';
import { type Gate, processGate } from './isolation-gate.js';
import type { Limiter } from './limiter.js';
import { type SettlePlan, settlePlanOf } from './settle-plan.js';

/** What {@link processGroup} runs a group through. */
export interface ProcessGroupDeps<R> {
  /** The inbox the groups run through: `processBatch` for a group of several, `process` for one. */
  inbox: Pick<Inbox<R>, 'process' | 'processBatch'>;
  /**
   * The process-wide isolation gate a group passes before it runs: fresh groups share it, a
   * suspect group holds it alone, so nothing else in the process runs beside it.
   */
  gate: Gate;
  /** The killer budget's call options: a suspect group's for a group that runs alone. */
  starts: StartBudgets<R>;
  /** A slot of it is held, inside the gate, while the group runs. @default none */
  limiter?: Pick<Limiter, 'acquire'>;
}

/** What a {@link DeliveryPipeline} needs from its adapter: the broker's side of each step. */
export interface DeliveryPipelineSpec<T, R> extends Omit<ProcessGroupDeps<R>, 'gate' | 'limiter'> {
  /** What core's settle plans need of the inbox's options: pass `inbox.options`. */
  settleContext: Pick<ResolvedInboxOptions, 'consumer' | 'recordFailed'>;
  /** Groups running at once. */
  concurrency: number;
  /** Deliveries per group (one transaction): the batch size, 1 without batching. */
  batchSize: number;
  /** The process-wide isolation gate. @default processGate() */
  gate?: Gate;
  /** The envelope of a delivery, asked for when its group runs. */
  envelope(item: T): Envelope;
  /**
   * A delivery's `redelivered` and `attempt`, without making its envelope, for `runsAlone` (the
   * engine's predicate). @default its envelope's
   */
  runsAlone?(item: T): boolean;
  /**
   * Carries out core's plan (never `rerun`: the pipeline runs those again itself); a promise when
   * it has to wait for the broker (a republish), nothing when it is done at once (an ack).
   */
  settle(item: T, plan: SettlePlan): Promise<void> | undefined;
  /** The inbox threw (a bug, it answers every message): give the group back to the broker. */
  handBack(items: T[]): Promise<void> | void;
  /** An error the pipeline handled: `inbox` (it threw), `process` (a group's run failed). */
  onError(where: string, err: unknown): void;
  /** Called whenever the pipeline is found idle or closed (before those waiting are told). */
  onIdle?(): void;
  /**
   * A batch short of `batchSize` waits up to `ms` for more while `more()` says more is on its way
   * (a fetch's deliveries arrive in several reads). @default none: a short batch starts at once
   */
  linger?: {
    /** The longest wait for more deliveries, in milliseconds. */
    ms: number;
    /** True while more deliveries of the current fetch are on their way. */
    more(): boolean;
  };
}

/**
 * The generic part of a consumer between a delivery and its settle: a queue in delivery order,
 * groups taken off its front (`takeGroup`: a delivery that `runsAlone` alone, fresh ones up to
 * `batchSize`), at most `concurrency` running, each through the inbox behind the isolation gate
 * (`processGroup`), core's settle plan for each outcome handed to the adapter's `settle`, and the
 * deliveries a stopped batch never ran put back at the front to run at once.
 */
export class DeliveryPipeline<T, R = unknown> {
  readonly #spec: DeliveryPipelineSpec<T, R>;
  readonly #deps: ProcessGroupDeps<R>;
  readonly #queue: T[] = [];
  #active = 0;
  #closed = false;
  #idle: (() => void)[] = [];
  #linger: NodeJS.Timeout | undefined;

  constructor(spec: DeliveryPipelineSpec<T, R>) {
    this.#spec = spec;
    this.#deps = { inbox: spec.inbox, gate: spec.gate ?? processGate(), starts: spec.starts };
  }

  /** Deliveries waiting to run. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Groups running now. */
  get active(): number {
    return this.#active;
  }

  /** Queues a delivery; it starts on the next `pump()`. */
  push(item: T): void {
    if (!this.#closed) this.#queue.push(item);
  }

  /** Starts what can run; `force`: a short batch does not wait for more. */
  pump(force = false): void {
    const { concurrency, batchSize, linger } = this.#spec;
    if (linger && !force && this.#queue.length < batchSize && linger.more()) {
      this.#linger ??= setTimeout(() => {
        this.#linger = undefined;
        this.pump(true);
      }, linger.ms);
      return;
    }
    clearTimeout(this.#linger);
    this.#linger = undefined;
    const alone = this.#alone;
    while (!this.#closed && this.#active < concurrency && this.#queue.length > 0) {
      const { group, suspect } = takeGroup(this.#queue, alone, batchSize);
      this.#active++;
      // One reaction per group, with callbacks made once per pipeline.
      this.#run(group, suspect).then(this.#groupDone, this.#groupFailed);
    }
  }

  readonly #alone = (t: T): boolean => {
    if (this.#spec.runsAlone) return this.#spec.runsAlone(t);
    const e = this.#spec.envelope(t);
    return runsAlone(e.redelivered, e.attempt);
  };

  /** A group's run ended: its slot is free. */
  readonly #groupDone = (): void => {
    this.#active--;
    this.pump();
    this.#checkIdle();
  };

  readonly #groupFailed = (err: unknown): void => {
    try {
      this.#spec.onError('process', err);
    } finally {
      this.#groupDone();
    }
  };

  /** The broker's side is gone: drop the queue (the broker redelivers it), run nothing more. */
  close(): void {
    this.#closed = true;
    this.#queue.length = 0;
    clearTimeout(this.#linger);
    this.#checkIdle();
  }

  /** Resolves once nothing is queued or running (or the pipeline is closed). */
  idle(): Promise<void> {
    if (this.#isIdle()) {
      this.#spec.onIdle?.();
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #isIdle(): boolean {
    return this.#queue.length === 0 && this.#active === 0;
  }

  #checkIdle(): void {
    if (!this.#isIdle() && !this.#closed) return;
    this.#spec.onIdle?.();
    for (const resolve of this.#idle.splice(0)) resolve();
  }

  async #run(items: T[], suspect: boolean): Promise<void> {
    const spec = this.#spec;
    let outcomes: Outcome<R>[];
    try {
      const envelopes: Envelope[] = [];
      for (const item of items) envelopes.push(spec.envelope(item));
      outcomes = await processGroup(this.#deps, envelopes, suspect);
    } catch (err) {
      spec.onError('inbox', err);
      await spec.handBack(items);
      return;
    }
    if (items.length === 1) {
      // A lone delivery (every group without batching): no arrays, no Promise.all.
      const plan = settlePlanOf(outcomes[0]!, spec.settleContext);
      if (plan.kind !== 'rerun') await spec.settle(items[0]!, plan);
      else if (!this.#closed) this.#queue.unshift(items[0]!);
      return;
    }
    // A batch stops at its first retry; the deliveries behind it never ran. They are still held,
    // so run them again at once rather than through the broker.
    const rerun: T[] = [];
    const settles: (Promise<void> | undefined)[] = [];
    for (let i = 0; i < outcomes.length; i++) {
      const plan = settlePlanOf(outcomes[i]!, spec.settleContext);
      if (plan.kind === 'rerun') rerun.push(items[i]!);
      else {
        const settled = spec.settle(items[i]!, plan);
        if (settled) settles.push(settled);
      }
    }
    if (rerun.length > 0 && !this.#closed) this.#queue.unshift(...rerun);
    if (settles.length > 0) await Promise.all(settles);
  }
}

/**
 * Runs one group of deliveries through the inbox behind the isolation gate: a suspect group (one
 * delivery that runs alone, which may be the one that killed the process) exclusive with the
 * suspect call options (the inbox counts its start), a fresh group shared, holding a `limiter` slot if given. One envelope goes through `process`, more through
 * `processBatch` (one transaction). The gate is left before this returns or throws. It throws what
 * the inbox throws, which answers every message with an outcome and throws for none: a throw is a
 * bug, and the adapter hands the group back to its broker.
 */
export async function processGroup<R>(
  deps: ProcessGroupDeps<R>,
  envelopes: readonly Envelope[],
  suspect: boolean,
): Promise<Outcome<R>[]> {
  // The gate is nearly always open to a fresh group: enter without a promise when it is. A gate
  // made by an older copy of @once/core (the gate is one per process) has no tryShared.
  const leave =
    (suspect ? undefined : deps.gate.tryShared?.()) ??
    (suspect ? await deps.gate.exclusive() : await deps.gate.shared());
  const release = deps.limiter ? await deps.limiter.acquire() : undefined;
  const call = suspect ? deps.starts.suspect : deps.starts.fresh;
  try {
    return envelopes.length > 1
      ? await deps.inbox.processBatch(envelopes, call)
      : [await deps.inbox.process(envelopes[0]!, call)];
  } finally {
    release?.();
    leave();
  }
}

/**
 * Takes the next group off the front of `queue` (removing it): a suspect delivery (`runsAlone`:
 * it may be the one that killed the process) alone, else fresh ones up to `max`, stopping before
 * the next suspect. `max` is the batch size, 1 without batching. `queue` must not be empty.
 */
export function takeGroup<T>(
  queue: T[],
  isSuspect: (item: T) => boolean,
  max: number,
): {
  /** The deliveries taken, in queue order (at least one). */
  group: T[];
  /** True when the group is one suspect delivery, to run alone. */
  suspect: boolean;
} {
  const suspect = isSuspect(queue[0]!);
  let n = 1;
  if (!suspect) while (n < max && n < queue.length && !isSuspect(queue[n]!)) n++;
  return { group: queue.splice(0, n), suspect };
}
