import type { JsMsg } from '@nats-io/jetstream';
import type { Inbox, Outcome } from '@once/core';
import {
  Limiter,
  processGate,
  processGroup,
  type StartCounter,
  settlePlanOf,
  takeGroup,
} from '@once/core/adapter';
import { envelopeOf } from './envelope-of.js';
import type { ResolvedNatsConsumerOptions } from './options.js';
import { DEAD_LETTER_RETRY_MS, type Held, Settler, type SettlerContext } from './settle.js';

/**
 * With `batch`, how long a batch short of `batchSize` waits for the rest of its pull, in ms: a
 * pull's messages arrive in several reads, and the first read alone would make a small batch.
 */
const BATCH_LINGER_MS = 10;

/** What the dispatcher needs from its consumer. */
export interface DispatcherContext<R> {
  inbox: Inbox<R>;
  options: ResolvedNatsConsumerOptions;
  counter: StartCounter<R>;
  /** The settler's context, but `release`: the dispatcher owns the held set. */
  settler: Omit<SettlerContext<R>, 'release'>;
  /** Messages the pull in flight may still deliver. */
  pullRemaining(): number;
  stopping(): boolean;
  noteError(where: string, err: unknown): void;
  /** A held message was settled: there is room for the next pull. */
  released(): void;
}

/**
 * Everything between a fetched message and its settle: the held set (what the fetch loop's room
 * is measured against and the heartbeat keeps alive), the queue, batching, the concurrency limit,
 * the isolation gate, the inbox, and core's settle plans handed to the {@link Settler}.
 */
export class Dispatcher<R> {
  readonly #ctx: DispatcherContext<R>;
  readonly #settler: Settler<R>;
  readonly #limiter: Limiter;
  readonly #gate = processGate();
  readonly #queue: Held[] = [];
  readonly #held = new Set<Held>();
  #idle: (() => void)[] = [];
  #pumpScheduled = false;
  #linger: NodeJS.Timeout | undefined;

  constructor(ctx: DispatcherContext<R>) {
    this.#ctx = ctx;
    this.#limiter = new Limiter(ctx.options.concurrency);
    this.#settler = new Settler<R>({
      ...ctx.settler,
      release: (h) => {
        this.#held.delete(h);
        ctx.released();
      },
    });
  }

  /** Messages fetched and not yet settled. */
  get held(): number {
    return this.#held.size;
  }

  /** Handlers (or batches) running now. */
  get active(): number {
    return this.#limiter.active;
  }

  /** Holds a fetched message and schedules a pump (the messages of one pull form one batch). */
  take(m: JsMsg): void {
    const held: Held = { m, envelope: envelopeOf(m, this.#ctx.options), done: false };
    this.#held.add(held);
    this.#queue.push(held);
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    // Coalesce: the messages of one pull arrive in a burst and form one batch.
    setImmediate(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  /** The pull ended: start what is queued without waiting for more of it. */
  pullEnded(): void {
    if (this.#queue.length > 0) this.#pump(true);
  }

  /** Resolves once nothing is queued or running. */
  async idle(): Promise<void> {
    if (this.#queue.length > 0 || this.#limiter.active > 0) {
      await new Promise<void>((resolve) => this.#idle.push(resolve));
    }
  }

  /** Stops a short batch's wait for the rest of its pull. */
  close(): void {
    clearTimeout(this.#linger);
  }

  /** Keeps every held message alive: buffered, waiting at the gate or in a handler. */
  beat(): void {
    for (const h of this.#held) {
      if (h.done) continue;
      try {
        h.m.working();
      } catch {
        return;
      }
    }
  }

  /** Starts what can run; with `batch`, a short batch waits up to BATCH_LINGER_MS for its pull. */
  #pump(force = false): void {
    const o = this.#ctx.options;
    if (
      o.batch &&
      !force &&
      this.#queue.length < o.batchSize &&
      this.#ctx.pullRemaining() > 0 &&
      !this.#ctx.stopping()
    ) {
      this.#linger ??= setTimeout(() => {
        this.#linger = undefined;
        this.#pump(true);
      }, BATCH_LINGER_MS);
      return;
    }
    clearTimeout(this.#linger);
    this.#linger = undefined;
    while (this.#queue.length > 0 && this.#limiter.active < o.concurrency) {
      const { group: take, suspect } = takeGroup(
        this.#queue,
        (h) => h.envelope.redelivered,
        o.batch ? o.batchSize : 1,
      );
      void this.#limiter.acquire().then((release) =>
        this.#run(take, suspect)
          .catch((err: unknown) => this.#ctx.noteError('process', err))
          .finally(() => {
            release();
            this.#pump();
            if (this.#queue.length === 0 && this.#limiter.active === 0) {
              for (const resolve of this.#idle.splice(0)) resolve();
            }
          }),
      );
    }
  }

  async #run(held: Held[], suspect: boolean): Promise<void> {
    let outcomes: Outcome<R>[];
    try {
      outcomes = await processGroup(
        { inbox: this.#ctx.inbox, gate: this.#gate, counter: this.#ctx.counter },
        held.map((h) => h.envelope),
        suspect,
      );
    } catch (err) {
      // The inbox answers every message with an outcome and throws for none: this is a bug. Hand
      // the messages back to JetStream after a pause, and say so.
      this.#ctx.noteError('inbox', err);
      for (const h of held) this.#settler.respond(h, 'nak', DEAD_LETTER_RETRY_MS);
      return;
    }
    // A batch stops at its first retry; the messages behind it never ran. They are still held,
    // so run them again at once rather than through a nak.
    const rerun: Held[] = [];
    const settles: Promise<void>[] = [];
    outcomes.forEach((outcome, i) => {
      const plan = settlePlanOf(outcome, this.#ctx.options.consumer);
      if (plan.kind === 'rerun') rerun.push(held[i]!);
      else settles.push(this.#settler.settle(held[i]!, outcome, plan));
    });
    if (rerun.length > 0) this.#queue.unshift(...rerun);
    await Promise.all(settles);
  }
}
