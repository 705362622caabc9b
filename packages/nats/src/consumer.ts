import { type ConsumerMessages, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { OnceError } from '@once/core';
import {
  ConsumerBase,
  type ConsumerHealth,
  type ConsumerState,
  optionCheck,
  sleep,
} from '@once/core/adapter';
import { Dispatcher } from './dispatch.js';
import { DurableSource } from './durable-source.js';
import { connectError, NatsErrorCode } from './errors.js';
import { NATS_CONSUMER_EVENT_NAMES, type NatsConsumerEventMap } from './events.js';
import { ownConnectOptions } from './liveness.js';
import {
  type NatsConsumerOptions,
  type ResolvedNatsConsumerOptions,
  resolveNatsConsumerOptions,
} from './options.js';
import { pullSize } from './pull-window.js';

/** Lifecycle states of a {@link NatsConsumer} (the kit's states). */
export type NatsConsumerState = ConsumerState;

/**
 * A snapshot for health checks. `healthy`: running, connected, the database and schema usable, the
 * durable consumer (and its stream) there, with `idFrom: 'sequence'` the record of which messages
 * keep bare sequence ids read, and (with a connection of your own) that connection not closed.
 */
export interface NatsConsumerHealth extends ConsumerHealth {
  /** The stream and durable consumed, once started. */
  stream: string | undefined;
  /** The durable pull consumer's name (the `durable` option, or the name derived from `subject`). */
  durable: string;
  /** Messages fetched and not yet settled (acked, naked or termed). */
  held: number;
  /** Handlers (or batches) running now. */
  active: number;
  /** Successful reconnects since start. */
  reconnects: number;
}

/** How long one pull request waits for messages, in ms. */
const FETCH_EXPIRES_MS = 5_000;
/** The first and the longest backoff after a failed pull, in ms. */
const FETCH_BACKOFF_MS = 100;
const FETCH_BACKOFF_MAX_MS = 5_000;

/**
 * Consumes a JetStream subject through a durable pull consumer with explicit acks, effectively
 * once: each message's id is claimed in the same PostgreSQL transaction as the handler's writes,
 * and the message is acked only after COMMIT. Retries are naks with core's delay; dead letters are
 * published (PubAck awaited) to `deadLetterSubject`, then termed. Every message held (buffered,
 * waiting at the gate, in a handler) is kept alive with `working()` every third of `ack_wait`.
 * With `batch`, the next batch is pulled while the current ones run (pull-window.ts).
 * While the database or once's schema cannot be used it fetches nothing, and begins again once
 * the schema checks out. Create it with {@link createNatsConsumer}.
 *
 * `start()` connects (or takes your connection), checks the server (2.9.0 or later, JetStream
 * on), finds the stream capturing `subject`, checks or creates the durable pull consumer and
 * checks the dead-letter subject, then starts fetching. It rejects with a named OnceError
 * (`NATS_CONNECT`, `NATS_SERVER`, `NATS_STREAM_NOT_FOUND`, `NATS_CONSUMER_NOT_FOUND`,
 * `NATS_CONSUMER_CONFIG`). `stop()` is graceful: no new pulls, held messages run and settle
 * (within `stopTimeoutMs`), the acks are flushed, and a connection once made is closed (yours is
 * left open). Idempotent. A durable deleted later (by hand, or with its stream) turns the
 * consumer unhealthy until it is there again; with `createConsumer`, once makes it again, on the
 * stream that then captures the subject.
 *
 * The consumer owns the connection and the fetch loop; the durable it pulls from, and which
 * messages keep bare sequence ids, are the `DurableSource`'s (durable-source.ts); what
 * happens to a fetched message is the {@link Dispatcher}'s (dispatch.ts), and its settle the
 * `Settler`'s (settle.ts).
 */
export class NatsConsumer<R = unknown> extends ConsumerBase<R, NatsConsumerEventMap, NatsConsumerHealth> {
  /** The events this consumer adds to the kit's: `on()` refuses any other name. */
  protected readonly ownEventNames = NATS_CONSUMER_EVENT_NAMES;
  /** The JetStream options after defaults. */
  readonly options: ResolvedNatsConsumerOptions;
  readonly #dispatch: Dispatcher<R>;
  /** Cuts a fetch backoff short on stop. */
  readonly #abort = new AbortController();
  #nc: NatsConnection | undefined;
  #source: DurableSource | undefined;
  #fetch: ConsumerMessages | undefined;
  #loop: Promise<void> | undefined;
  #waiters: (() => void)[] = [];
  #wakeScheduled = false;
  /** Messages the pull in flight may still deliver. */
  #pullRemaining = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  #connected = false;
  #closedError: OnceError | undefined;
  #reconnects = 0;

  constructor(options: NatsConsumerOptions<R>) {
    const { nats, inbox } = resolveNatsConsumerOptions(options);
    // JetStream counts deliveries, not runs (a nak of a message that never ran counts too): a
    // message's attempt is its starts counted in PostgreSQL, as on SQS.
    super({
      name: 'once/nats',
      inbox: { ...inbox, consumer: nats.consumer },
      stopTimeoutMs: nats.stopTimeoutMs,
      attemptIsStarts: true,
    });
    this.options = nats;
    this.#dispatch = new Dispatcher<R>({
      inbox: this.inbox,
      options: nats,
      starts: this.starts,
      settler: {
        consumer: nats.consumer,
        durable: nats.durable,
        deadLetterSubject: nats.deadLetterSubject,
        events: this.life.events,
        logger: this.inbox.options.logger,
        js: () => this.#source!.js,
        stream: () => this.#source!.setup.stream,
        noteError: (where, err) => this.life.noteError(where, err),
      },
      pullRemaining: () => this.#pullRemaining,
      stopping: () => this.life.stopping,
      noteError: (where, err) => this.life.noteError(where, err),
      released: () => this.#wakeAfterSettle(),
    });
  }

  /**
   * A snapshot for health checks: the kit's fields plus the stream, the durable, the messages held and the
   * reconnects; healthy needs the connection up and the stream and durable usable.
   */
  health(): NatsConsumerHealth {
    return {
      ...this.life.health(
        this.#connected && this.#closedError === undefined && this.#source?.problem === undefined,
      ),
      stream: this.#source?.setup.stream,
      durable: this.options.durable,
      held: this.#dispatch.held,
      active: this.#dispatch.active,
      reconnects: this.#reconnects,
    };
  }

  // ---------------------------------------------------------------- life

  /** Connects, sets up (setup.ts), starts the heartbeat and the fetch loop. */
  protected async open(): Promise<void> {
    const o = this.options;
    let nc = o.connection;
    if (!nc) {
      try {
        nc = await connect(ownConnectOptions(o.servers, `once:${o.consumer}`));
      } catch (err) {
        throw connectError(err, o.servers);
      }
    } else if (nc.isClosed()) {
      throw new OnceError(
        NatsErrorCode.ConnectionClosed,
        'the connection passed as options.connection is closed',
      );
    }
    this.#nc = nc;
    this.#connected = true;
    const jsm = await jetstreamManager(nc).catch((err: unknown) => {
      throw new OnceError(NatsErrorCode.Server, `JetStream is not available: ${(err as Error)?.message}`, {
        cause: err,
      });
    });
    this.#source = await DurableSource.open({
      nc,
      jsm,
      options: o,
      handlerTimeoutMs: this.inbox.options.handlerTimeoutMs,
      inbox: this.inbox.options,
      noteError: (where, err) => this.life.noteError(where, err),
    });
    this.#watch(nc);
    const every = Math.max(100, Math.floor(this.#source.setup.ackWaitMs / 3));
    this.#heartbeat = setInterval(() => {
      if (this.#connected) this.#dispatch.beat();
    }, every);
    this.#heartbeat.unref?.();
    this.#loop = this.#fetchLoop();
  }

  /** The loop checks `fetching` before each pull; a pull in flight is stopped. */
  protected pause(): void {
    this.#fetch?.stop();
  }

  /** Takes messages again after a pause: wakes the fetch loop. */
  protected resume(): void {
    this.#wake();
  }

  /** No new pulls; held messages (a batch pulled ahead too) run and settle; the acks are flushed. */
  protected async drain(): Promise<void> {
    this.#fetch?.stop();
    this.#abort.abort();
    this.#wake();
    await this.#loop;
    await this.#dispatch.idle();
    await this.#nc?.flush().catch(() => {});
  }

  /**
   * Closes a connection once made (yours is left open). Past the stop deadline, messages still
   * waiting to run (a batch pulled ahead) are dropped unsettled and no longer kept alive:
   * JetStream redelivers them after `ack_wait`.
   */
  protected async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    this.#dispatch.close();
    this.#fetch?.stop();
    this.#abort.abort();
    this.#wake();
    const nc = this.#nc;
    if (nc && !this.options.connection && !nc.isClosed()) await nc.close().catch(() => {});
  }

  #watch(nc: NatsConnection): void {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect') {
          this.#connected = false;
          this.life.set('reconnecting');
          this.life.events.emit('disconnected', { error: undefined });
        } else if (s.type === 'reconnect') {
          this.#connected = true;
          this.#reconnects++;
          this.life.set('running');
          this.life.events.emit('connected', { reconnects: this.#reconnects });
          this.#wake();
        }
      }
    })().catch(() => {});
    void nc.closed().then((err) => {
      this.#connected = false;
      if (this.life.stopping) return;
      this.#closedError = new OnceError(
        NatsErrorCode.ConnectionClosed,
        `the NATS connection closed${err ? `: ${err.message}` : ''}; the consumer cannot fetch or settle: stop it and start a new one`,
        { cause: err },
      );
      this.life.noteError('connection', this.#closedError);
      this.#fetch?.stop();
      this.#wake();
    });
  }

  /**
   * A held message was settled. The loop pulls on the next turn of the event loop, not in the
   * settle's own microtasks: the pipeline starts its next batch first, and the pull is set up
   * while that batch waits for PostgreSQL. One wake for a batch's settles.
   */
  #wakeAfterSettle(): void {
    if (this.#wakeScheduled) return;
    this.#wakeScheduled = true;
    setImmediate(() => {
      this.#wakeScheduled = false;
      this.#wake();
    });
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }

  #wait(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  // ---------------------------------------------------------------- fetching

  async #fetchLoop(): Promise<void> {
    const o = this.options;
    const source = this.#source!;
    let backoffMs = FETCH_BACKOFF_MS;
    while (!this.life.stopping && this.#closedError === undefined) {
      // pull-window.ts: with `batch`, the next batch is pulled while the current ones run.
      const room = pullSize(o, this.#dispatch.held);
      if (!this.life.fetching || room === 0) {
        await this.#wait();
        continue;
      }
      let ok = await source.ready();
      if (ok) {
        try {
          this.#pullRemaining = room;
          this.#fetch = await source.pull(room, FETCH_EXPIRES_MS);
          await source.place(
            this.#fetch,
            (placed) => this.#dispatch.take(placed),
            () => this.#pullRemaining--,
          );
        } catch (err) {
          if (this.life.stopping || this.#closedError) break;
          ok = false;
          this.life.noteError('fetch', err);
          await source.pullFailed();
        } finally {
          this.#fetch = undefined;
          this.#pullRemaining = 0;
          this.#dispatch.pullEnded();
        }
      }
      if (ok) {
        backoffMs = FETCH_BACKOFF_MS;
      } else if (!this.life.stopping) {
        await sleep(backoffMs, this.#abort.signal);
        backoffMs = Math.min(backoffMs * 2, FETCH_BACKOFF_MAX_MS);
      }
    }
  }
}

/** Creates a {@link NatsConsumer}; validates the options (naming the bad field). Call `start()` next. */
export function createNatsConsumer<R = unknown>(options: NatsConsumerOptions<R>): NatsConsumer<R> {
  return optionCheck.namingFactory('createNatsConsumer', () => new NatsConsumer(options));
}
