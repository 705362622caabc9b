import { type InboxOptions, resolveInboxOptions } from '../engine/options.js';
import type { ProcessOptions } from '../engine/process-options.js';
import { Inbox } from '../inbox.js';
import type { Envelope } from '../message/envelope.js';
import { checkEventName, type TypedEmitter } from '../message/events.js';
import {
  CONSUMER_EVENT_NAMES,
  type Consumer,
  type ConsumerEventMap,
  type ConsumerHealth,
  type ConsumerState,
} from './consumer.js';
import { ConsumerLifecycle } from './lifecycle.js';

/**
 * The killer budget as the inbox's call options, made once per consumer: `suspect` for a delivery
 * that runs alone (see `runsAlone`), `fresh` for the others (undefined unless the broker counts
 * deliveries, not runs). The inbox counts the starts; see `ProcessOptions.starts` in `@once/core`.
 */
export interface StartBudgets<R> {
  /** The options of a delivery that does not run alone: undefined unless `attemptIsStarts`. */
  readonly fresh: ProcessOptions<R> | undefined;
  /** The options of a delivery that runs alone: its start is counted. */
  readonly suspect: ProcessOptions<R>;
}

/** What a {@link ConsumerBase} needs from the adapter's constructor. */
export interface ConsumerBaseSpec<R> {
  /** Prefix of log lines: `once/kafka`. */
  name: string;
  /** The inbox's options after the adapter's split, `consumer` set. */
  inbox: InboxOptions<R>;
  /** How long `stop()` waits for in-flight messages to settle, in ms. */
  stopTimeoutMs: number;
  /** The broker counts deliveries, not runs: see `ProcessOptions.starts.attemptIsStarts`. @default false */
  attemptIsStarts?: boolean;
}

/**
 * The part of a consumer that is the same on every broker: the inbox with the killer budget's
 * call options (`starts`; the inbox's refusals are the `message:killed-consumer` event), the
 * lifecycle (state,
 * the one emitter, the stop deadline, the hold while the database is unusable), and the
 * `Consumer` methods over them. An adapter extends it and writes what only its broker knows:
 * `open`, `pause`, `resume`, `drain` and `close` (its abstract members) and `health()`
 * (the kit's fields from `this.life.health(ok)`, plus its own).
 *
 * A base class rather than a helper the adapter holds: what it saves is exactly the `Consumer`
 * methods, which a held helper would still make every adapter forward one by one.
 */
export abstract class ConsumerBase<
  R,
  M extends ConsumerEventMap = ConsumerEventMap,
  H extends ConsumerHealth = ConsumerHealth,
> implements Consumer<R, M, H>
{
  /** The inbox doing the processing; subscribe to per-message events with `inbox.on(...)`. */
  readonly inbox: Inbox<R>;
  /** State, the one emitter (`life.events`), `stopping`, `fetching`, `noteError`. */
  protected readonly life: ConsumerLifecycle<R, M>;
  /** The killer budget: the call options of a delivery that runs alone, and of the others. */
  protected readonly starts: StartBudgets<R>;

  protected constructor(spec: ConsumerBaseSpec<R>) {
    const attemptIsStarts = spec.attemptIsStarts === true;
    const onExhausted = (envelope: Envelope, starts: number) =>
      this.#events.emit('message:killed-consumer', { id: envelope.id, starts, source: envelope.source });
    this.starts = Object.freeze({
      fresh: attemptIsStarts
        ? Object.freeze({ starts: Object.freeze({ suspect: false, attemptIsStarts }) })
        : undefined,
      suspect: Object.freeze({ starts: Object.freeze({ suspect: true, attemptIsStarts, onExhausted }) }),
    });
    // The consumer logs the failure lines where it settles, with their destination (see lifecycle.ts).
    this.inbox = new Inbox<R>(resolveInboxOptions<R>(spec.inbox), {
      failureLines: 'adapter',
      name: spec.name,
    });
    this.life = new ConsumerLifecycle<R, M>({
      name: spec.name,
      inbox: this.inbox,
      logger: this.inbox.options.logger,
      stopTimeoutMs: spec.stopTimeoutMs,
    });
    this.life.attach({
      open: () => this.open(),
      pause: () => this.pause(),
      resume: () => this.resume(),
      drain: () => this.drain(),
      close: () => this.close(),
    });
  }

  /** The emitter as the kit's base map (the adapter's map extends it). */
  get #events(): TypedEmitter<ConsumerEventMap> {
    return this.life.events as unknown as TypedEmitter<ConsumerEventMap>;
  }

  /** Connects, declares, subscribes; fetch at once only when `life.fetching` is true at its end. */
  protected abstract open(): Promise<void>;
  /** Stop taking messages: the database or once's schema cannot be used. */
  protected abstract pause(): void | Promise<void>;
  /** Take messages again. */
  protected abstract resume(): void | Promise<void>;
  /** Stop fetching for good; resolve once everything in flight has settled with the broker. */
  protected abstract drain(): Promise<void>;
  /** Close every client: after `drain`, or once `stopTimeoutMs` has passed without it. */
  protected abstract close(): Promise<void>;

  /**
   * A snapshot of the consumer's health: its state, whether it is healthy and available, its last handled
   * error, and the broker's own fields.
   */
  abstract health(): H;

  /** Where the consumer is in its life now (`idle`, `running`, `stopped`, ...); see {@link ConsumerState}. */
  get state(): ConsumerState {
    return this.life.state;
  }

  /**
   * The adapter's own event names, those its map adds to the kit's: `on()` refuses a name that is
   * neither with `UNKNOWN_EVENT`.
   */
  protected abstract readonly ownEventNames: Readonly<Record<Exclude<keyof M, keyof ConsumerEventMap>, true>>;

  /** Subscribes to a consumer event; returns an unsubscribe function. Throws `UNKNOWN_EVENT` for a name it never emits. */
  on<E extends keyof M>(name: E, listener: (event: M[E]) => void): () => void {
    if (!Object.hasOwn(CONSUMER_EVENT_NAMES, name)) {
      checkEventName(this.constructor.name, { ...CONSUMER_EVENT_NAMES, ...this.ownEventNames }, name);
    }
    return this.life.events.on(name, listener);
  }

  /**
   * Connects and starts consuming; the adapter's class documents what it checks. Rejects only for
   * the broker's sake, never because of the database: while it or once's schema is not usable
   * the consumer runs unhealthy, takes nothing, and begins once the schema checks out.
   */
  start(): Promise<void> {
    return this.life.start();
  }

  /** Stops fetching, lets in-flight messages settle (up to `stopTimeoutMs`), closes. Idempotent. */
  stop(): Promise<void> {
    return this.life.stop();
  }

  /** Stops the consumer as `stop()` does, for `await using consumer = ...`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
