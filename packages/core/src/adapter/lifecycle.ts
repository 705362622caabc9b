import { ErrorCode, OnceError, serializeError } from '../errors.js';
import { isEnvironmentVerdict, outsideMessage } from '../handler/verdict.js';
import type { Inbox } from '../inbox.js';
import type { Logger } from '../logger.js';
import type { EnvelopeSource } from '../message/envelope.js';
import { TypedEmitter } from '../message/events.js';
import type { ConsumerEventMap, ConsumerHealth, ConsumerState } from './consumer.js';

/** What a broker adapter does at each step of its consumer's life. */
export interface LifecycleHooks {
  /**
   * Connects, declares, subscribes. Fetch at once only when `lifecycle.fetching` is true at the
   * end of it; otherwise wait for `resume()`. A rejection fails `start()` (state `failed`).
   */
  open(): Promise<void>;
  /** Stop taking messages from the broker: the database or the schema cannot be used. */
  pause(): void | Promise<void>;
  /** Take messages again. */
  resume(): void | Promise<void>;
  /** Stop fetching for good; resolve once everything in flight has settled with the broker. */
  drain(): Promise<void>;
  /** Close every client. Called after `drain`, or once `stopTimeoutMs` has passed without it. */
  close(): Promise<void>;
}

/** What a {@link ConsumerLifecycle} needs. */
export interface LifecycleSpec<R> {
  /** Prefix of log lines: `once/kafka`. */
  name: string;
  /** The consumer's inbox: its outcomes tell when the database is unusable. */
  inbox: Inbox<R>;
  /** Where the lifecycle logs (starting, holding, stopping). */
  logger: Logger;
  /** How long `stop()` waits for in-flight messages to settle, in ms. */
  stopTimeoutMs: number;
  /** How long `start()` waits for the first schema check, in ms. @default 5000 */
  readyWaitMs?: number;
}

/**
 * How long `start()` waits for the first schema check before it goes on without it, in ms: a
 * database behind a black hole (no refusal, no answer) must not hang `start()`.
 */
const DEFAULT_READY_WAIT_MS = 5_000;

/** Backoff between schema checks while the database or schema is unusable, in ms. */
function probeDelayMs(attempt: number): number {
  const base = Math.min(250 * 2 ** Math.max(0, attempt - 1), 5_000);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

/**
 * The start/stop life of a consumer, the same on every broker, and its one event emitter.
 *
 * - `start()` runs once; a second call while starting gets the same promise, later ones a
 *   `CLOSED` error. It fails only for the broker's sake: when PostgreSQL is down or once's schema
 *   is missing or too new, the consumer still starts, fetches nothing and reports unhealthy.
 * - Whenever the inbox answers `not-run` / `unavailable` (the database or the schema cannot be
 *   used), or a statement of once's own before a run met the same (`holdIfUnavailable`), the
 *   broker is told to stop handing over messages (`pause`), and the schema is checked with
 *   backoff until it passes; then `resume`. Nothing is dead-lettered or spent meanwhile. An
 *   inbox over several databases holds this way only when none of them can be used: while one
 *   can, only the messages of the others wait, each given back unspent.
 * - `stop()` drains within `stopTimeoutMs`, then closes whatever is left; idempotent.
 */
export class ConsumerLifecycle<R, M extends ConsumerEventMap = ConsumerEventMap> {
  /** The consumer's one emitter: the adapter emits its own events here too. */
  readonly events: TypedEmitter<M>;
  readonly #spec: LifecycleSpec<R>;
  readonly #base: TypedEmitter<ConsumerEventMap>;
  #hooks: LifecycleHooks | undefined;
  #state: ConsumerState = 'idle';
  #available = true;
  #unavailableSince = 0;
  /** What the broker was last told: fetch (true) or hold (false). */
  #fetching = false;
  #probe: NodeJS.Timeout | undefined;
  #probeAttempt = 0;
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #lastError: ConsumerHealth['lastError'];

  constructor(spec: LifecycleSpec<R>) {
    this.#spec = spec;
    this.events = new TypedEmitter<M>(spec.logger);
    this.#base = this.events as unknown as TypedEmitter<ConsumerEventMap>;
    this.#base.on('error', (e) => {
      this.#lastError = { ...e.error, where: e.where, at: Date.now() };
    });
    spec.inbox.on('message:not-run', (e) => {
      if (e.why === 'unavailable' && !this.#othersUsable()) this.#trip(e.error);
    });
    this.#failureLines(spec.inbox);
  }

  /**
   * The failure lines of a consumer whose inbox leaves them to it (`inbox.failureLines` is
   * `adapter`, as `ConsumerBase` makes it), logged here once for every adapter: each dead letter
   * with where it went, and each conflict that is acknowledged rather than dead-lettered.
   */
  #failureLines(inbox: Inbox<R>): void {
    if (inbox.failureLines !== 'adapter') return;
    const failures = inbox.options.failureLogger;
    const name = this.#spec.name;
    this.#base.on('message:dead-lettered', (e) => {
      failures.warn(
        {
          consumer: inbox.options.consumer,
          id: e.id,
          reason: e.reason,
          destination: e.deadLetter ?? 'dropped (dead-lettering off)',
          recorded: e.recorded,
          attempt: `${e.attempts} of ${inbox.options.maxAttempts}`,
          error: e.error.message,
          code: e.error.code,
          // Where the delivery was: an invalid id has no other handle on it.
          ...sourceFields(e.source),
        },
        `${name}: message dead-lettered`,
      );
    });
    inbox.on('message:conflict', (e) => {
      if (e.action !== 'ack') return;
      failures.warn(
        { consumer: e.consumer, id: e.id, reason: 'conflict', destination: 'acknowledged, not recorded' },
        `${name}: same message id, different payload`,
      );
    });
  }

  /** Sets the adapter's hooks; call once, in the adapter's constructor. */
  attach(hooks: LifecycleHooks): void {
    this.#hooks = hooks;
  }

  /** The consumer's state now. */
  get state(): ConsumerState {
    return this.#state;
  }

  /** False while the database or once's schema cannot be used. */
  get available(): boolean {
    return this.#available;
  }

  /** Whether the adapter should take messages from the broker now. */
  get fetching(): boolean {
    return this.#available && !this.stopping;
  }

  /** True once `stop()` was called (or the consumer is over): nothing new should start. */
  get stopping(): boolean {
    return this.#state === 'stopping' || this.#state === 'stopped' || this.#state === 'failed';
  }

  /** For adapters that reconnect: `reconnecting` while the broker is lost, `running` once back. */
  set(state: 'running' | 'reconnecting'): void {
    if (this.stopping || this.#state === state) return;
    this.#move(state);
  }

  /** Records an error the consumer handled itself and emits it as `error`. */
  noteError(where: string, err: unknown): void {
    this.#base.emit('error', { where, error: serializeError(err) });
  }

  /** The base health fields; `ok` is the adapter's own verdict (connected, nothing stopped). */
  health(ok: boolean): ConsumerHealth {
    return {
      state: this.#state,
      healthy: this.#state === 'running' && this.#available && ok,
      available: this.#available,
      unavailableDatabases: this.#spec.inbox.unavailableDatabases,
      lastError: this.#lastError,
    };
  }

  /** Starts once (`open`, then running): a call while starting gets the same promise; a call after that rejects (`CLOSED`). */
  start(): Promise<void> {
    if (this.#state !== 'idle') {
      if (this.#state === 'starting' && this.#starting) return this.#starting;
      return Promise.reject(
        new OnceError(
          ErrorCode.Closed,
          `${this.#spec.name}: start() called in state '${this.#state}'; a consumer starts once: create a new one`,
        ),
      );
    }
    this.#move('starting');
    this.#starting = this.#start();
    return this.#starting;
  }

  async #start(): Promise<void> {
    const hooks = this.#need();
    const waitMs = this.#spec.readyWaitMs ?? DEFAULT_READY_WAIT_MS;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        // Over several databases, one usable database is enough to start fetching (see #othersUsable).
        this.#spec.inbox.databases.length > 0 ? this.#spec.inbox.readyAny() : this.#spec.inbox.ready(),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new OnceError(ErrorCode.Database, `no answer from PostgreSQL within ${waitMs} ms`)),
            waitMs,
          );
        }),
      ]);
    } catch (err) {
      this.#trip(serializeError(err));
    } finally {
      clearTimeout(timer);
    }
    this.#fetching = this.#available;
    try {
      await hooks.open();
    } catch (err) {
      clearTimeout(this.#probe);
      await hooks.close().catch(() => {});
      this.#move('failed');
      throw err;
    }
    if (this.#state === 'starting') this.#move('running');
    await this.#sync();
  }

  /** Stops fetching, waits for in-flight messages up to the stop deadline, then closes. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    if (this.#starting) await this.#starting.catch(() => {});
    clearTimeout(this.#probe);
    if (this.#state === 'idle' || this.#state === 'failed' || this.#state === 'stopped') {
      this.#move('stopped');
      return;
    }
    this.#move('stopping');
    const hooks = this.#need();
    const { stopTimeoutMs, logger, name } = this.#spec;
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      hooks.drain().then(
        () => true,
        (err: unknown) => {
          this.noteError('stop', err);
          return true;
        },
      ),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), stopTimeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (!drained) {
      const message = `in-flight messages did not settle within stopTimeoutMs (${stopTimeoutMs} ms); closing anyway: the broker redelivers them and the inbox answers for them`;
      logger.warn({}, `${name}: ${message}`);
      this.noteError('stop', new OnceError(ErrorCode.Closed, message));
    }
    try {
      await hooks.close();
    } catch (err) {
      this.noteError('close', err);
    }
    this.#move('stopped');
  }

  /**
   * A statement of once's own that runs outside any message's transaction, before the messages it
   * guards (a replay marker noted in PostgreSQL: `Inbox.noteInflight`), failed with `err`. When the
   * engine's one verdict calls it the environment's (`isEnvironmentVerdict`: what the engine makes
   * an `unavailable` outcome of, before a handler started; a rival's lock is not), the consumer
   * holds exactly as for an `unavailable` outcome: the broker is told to
   * pause, the schema is checked with backoff, nothing is spent or dead-lettered; returns true.
   * Otherwise returns false: the failure is the caller's to handle.
   */
  holdIfUnavailable(err: unknown): boolean {
    if (!isEnvironmentVerdict(outsideMessage(err))) return false;
    this.#trip(serializeError(err));
    return true;
  }

  /**
   * An inbox over several databases (`databases`) with one of them still usable: the consumer
   * keeps fetching. What goes to an unusable database comes back `not-run` (`unavailable`), its
   * attempt not spent, and the broker gives it again after its delay, so only those messages
   * wait (and on an ordered broker, what is behind them in their partition); the other
   * databases' messages run. Only when every database is unusable does the whole consumer hold.
   */
  #othersUsable(): boolean {
    const { inbox } = this.#spec;
    const all = inbox.databases.length;
    return all > 0 && inbox.unavailableDatabases.length < all;
  }

  /** The database or the schema cannot be used: hold the broker, check the schema with backoff. */
  #trip(error: ReturnType<typeof serializeError>): void {
    if (!this.#available || this.stopping) return;
    this.#available = false;
    this.#unavailableSince = Date.now();
    this.#lastError = { ...error, where: 'database', at: Date.now() };
    this.#spec.logger.warn(
      { consumer: this.#spec.inbox.consumer, error: error.message },
      `${this.#spec.name}: the database or once's schema cannot be used; fetching stops until it can`,
    );
    this.#base.emit('consumer:paused', { error });
    this.#probeAttempt = 0;
    this.#scheduleProbe();
    void this.#sync();
  }

  #scheduleProbe(): void {
    clearTimeout(this.#probe);
    if (this.stopping) return;
    this.#probe = setTimeout(() => void this.#check(), probeDelayMs(++this.#probeAttempt));
    this.#probe.unref?.();
  }

  async #check(): Promise<void> {
    try {
      // Not inbox.ready(): it keeps its first success, and the database may have gone since.
      // Over several databases, one usable database is enough to fetch again (see #othersUsable).
      await this.#spec.inbox.checkNow('any');
    } catch (err) {
      this.#lastError = { ...serializeError(err), where: 'database', at: Date.now() };
      this.#scheduleProbe();
      return;
    }
    if (this.stopping || this.#available) return;
    this.#available = true;
    const pausedMs = Date.now() - this.#unavailableSince;
    this.#spec.logger.info(
      {
        consumer: this.#spec.inbox.consumer,
        pausedMs,
      },
      `${this.#spec.name}: the database and schema are usable again; fetching resumes`,
    );
    this.#base.emit('consumer:resumed', { pausedMs });
    await this.#sync();
  }

  /** Tells the broker to fetch or hold, when that differs from what it was last told. */
  async #sync(): Promise<void> {
    if (this.#state !== 'running' && this.#state !== 'reconnecting') return;
    const want = this.#available;
    if (want === this.#fetching) return;
    this.#fetching = want;
    try {
      await (want ? this.#need().resume() : this.#need().pause());
    } catch (err) {
      this.noteError(want ? 'resume' : 'pause', err);
    }
  }

  #move(state: ConsumerState): void {
    const previous = this.#state;
    this.#state = state;
    this.#base.emit('consumer:state', { state, previous });
  }

  #need(): LifecycleHooks {
    if (!this.#hooks) throw new Error('ConsumerLifecycle: attach(hooks) was not called');
    return this.#hooks;
  }
}

/** The delivery's place on its broker, for a log line: queue or topic, partition, offset or sequence, group. */
function sourceFields(source: EnvelopeSource): Record<string, unknown> {
  const { queue, partition, offset, group, delivery } = source;
  return { queue, partition, offset, group, delivery };
}
