import type { Inbox } from '@once/core';
import { DeliveryPipeline, type StartBudgets } from '@once/core/adapter';
import { envelopeOf, type Placed } from './envelope-of.js';
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
  /** The killer budget's call options. */
  starts: StartBudgets<R>;
  /** The settler's context, but `release`: the dispatcher owns the held set. */
  settler: Omit<SettlerContext, 'release'>;
  /** Messages the pull in flight may still deliver. */
  pullRemaining(): number;
  stopping(): boolean;
  noteError(where: string, err: unknown): void;
  /** A held message was settled: there is room for the next pull. */
  released(): void;
}

/**
 * Everything between a fetched message and its settle: the held set (what the fetch loop's room
 * is measured against and the heartbeat keeps alive), and the kit's {@link DeliveryPipeline}
 * (batching, the concurrency limit, the isolation gate, the inbox, core's settle plans) handing
 * its plans to the {@link Settler}; a short batch waits for the rest of its pull.
 */
export class Dispatcher<R> {
  readonly #ctx: DispatcherContext<R>;
  readonly #settler: Settler;
  readonly #pipeline: DeliveryPipeline<Held, R>;
  readonly #held = new Set<Held>();
  #pumpScheduled = false;

  constructor(ctx: DispatcherContext<R>) {
    this.#ctx = ctx;
    const o = ctx.options;
    this.#settler = new Settler({
      ...ctx.settler,
      release: (h) => {
        this.#held.delete(h);
        ctx.released();
      },
    });
    this.#pipeline = new DeliveryPipeline<Held, R>({
      inbox: ctx.inbox,
      starts: ctx.starts,
      settleContext: ctx.inbox.options,
      concurrency: o.concurrency,
      batchSize: o.batch ? o.batchSize : 1,
      envelope: (h) => h.envelope,
      settle: (h, plan) => this.#settler.settle(h, plan),
      // The inbox threw: hand the messages back to JetStream after a pause.
      handBack: (held) => {
        for (const h of held) this.#settler.respond(h, 'nak', DEAD_LETTER_RETRY_MS);
      },
      onError: (where, err) => ctx.noteError(where, err),
      // With `batch`, a short batch waits for the rest of its pull.
      ...(o.batch
        ? { linger: { ms: BATCH_LINGER_MS, more: () => ctx.pullRemaining() > 0 && !ctx.stopping() } }
        : {}),
    });
  }

  /** Messages fetched and not yet settled. */
  get held(): number {
    return this.#held.size;
  }

  /** Handlers (or batches) running now. */
  get active(): number {
    return this.#pipeline.active;
  }

  /** Holds a fetched message and schedules a pump (the messages of one pull form one batch). */
  take(placed: Placed): void {
    const held: Held = { m: placed.m, envelope: envelopeOf(placed, this.#ctx.options), done: false };
    this.#held.add(held);
    this.#pipeline.push(held);
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    // Coalesce: the messages of one pull arrive in a burst and form one batch.
    setImmediate(() => {
      this.#pumpScheduled = false;
      this.#pipeline.pump();
    });
  }

  /** The pull ended: start what is queued without waiting for more of it. */
  pullEnded(): void {
    if (this.#pipeline.queued > 0) this.#pipeline.pump(true);
  }

  /**
   * Past the stop deadline: what is queued (a batch pulled ahead) never starts and is not settled;
   * JetStream redelivers it after `ack_wait`. What runs still settles.
   */
  close(): void {
    this.#pipeline.close();
  }

  /** Resolves once nothing is queued or running. */
  idle(): Promise<void> {
    return this.#pipeline.idle();
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
}
