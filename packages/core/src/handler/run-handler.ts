import { DeadlineError, ErrorCode, OnceError, PermanentError } from '../errors.js';
import type { Envelope } from '../message/envelope.js';
import { idempotencyKey } from '../message/idempotency-key.js';
import type { Outbox } from '../outbox/outbox.js';
import type { PgClientLike, Queryable } from '../pg/pg-like.js';
import { toJsonb } from '../sql/jsonb.js';
import type { Handler, HandlerContext } from './handler.js';
import { TxHandle } from './tx-handle.js';

/** What one handler run came to. `json` is the serialised result when results are stored. */
export type HandlerRun<R> =
  | { ok: true; result: R; json: string | null; published: boolean }
  | { ok: false; error: unknown };

/** Everything {@link runHandler} needs besides the envelope. */
export interface RunSpec<R> {
  handler: Handler<R>;
  client: PgClientLike;
  id: string;
  consumer: string;
  timeoutMs: number;
  storeResult: boolean;
  outbox: Outbox | undefined;
  /** The caller-owned transaction object (`options.transactions`), handed on as `ctx.transaction`. */
  transaction?: unknown;
}

/**
 * Runs a handler under its deadline with a revocable transaction handle. Never throws: a
 * failure comes back as `{ ok: false }`. The AbortSignal is made only if the handler reads it
 * (an AbortController per message is a measurable cost in batches).
 *
 * Per message this makes one {@link TxRun} (the handle, the deadline, the signal's state), the
 * context and its two closures. The context stays a plain object whose functions are own
 * properties (handlers destructure and spread it); `signal` is an own accessor too, but with one
 * getter shared by every context (see {@link SIGNAL}): a getter written in the object literal is
 * a new closure per message, which leaves the object in dictionary mode and costs about 1 µs
 * more per message, most of it in the garbage collector.
 */
export function runHandler<R>(spec: RunSpec<R>, envelope: Envelope): Promise<HandlerRun<R>> {
  const run = new TxRun<R>(spec.client, spec.timeoutMs, spec.storeResult, spec.outbox);
  const { id, consumer } = spec;
  const ctx = {
    tx: run.tx,
    id,
    consumer,
    attempt: envelope.attempt,
    publish: (destination, body, options) => run.publish(destination, body, options),
  } as Partial<HandlerContext> as HandlerContext;
  Object.defineProperty(ctx, 'signal', SIGNAL);
  ctx.step = stepNeedsLease;
  ctx.idempotencyKey = (step) => idempotencyKey(consumer, id, step);
  if (spec.transaction !== undefined) ctx.transaction = spec.transaction;
  RunOf.stamp(ctx, run);
  return run.start(spec.handler, envelope, ctx);
}

/** `ctx.publish`: enqueue into `tx` through the inbox's outbox, or say how to configure one. */
export function publisherFor(
  outbox: Outbox | undefined,
  tx: Queryable,
  onPublish: () => void,
): HandlerContext['publish'] {
  return (destination, body, options) => publishVia(outbox, tx, onPublish, destination, body, options);
}

function publishVia(
  outbox: Outbox | undefined,
  tx: Queryable,
  onPublish: (() => void) | undefined,
  ...[destination, body, options]: Parameters<HandlerContext['publish']>
): Promise<string> {
  if (!outbox) {
    return Promise.reject(
      new OnceError(
        ErrorCode.InvalidOption,
        'ctx.publish needs an outbox: pass options.outbox = createOutbox(...)',
      ),
    );
  }
  onPublish?.();
  return outbox.enqueue(tx, destination, body, options);
}

/** How {@link underDeadline} reports to the runner that called it. */
export interface DeadlineSpec {
  timeoutMs: number;
  storeResult: boolean;
  /** The deadline passed (abort what the handler holds). */
  onExpire: (err: DeadlineError) => void;
  /** Runs once, before the outcome is resolved, whichever way the run ended (revoke handles). */
  onSettle: () => void;
  published: () => boolean;
}

/**
 * One handler run under its deadline: the timer, whether it settled, the promise it resolves.
 * Never rejects. A class, so that a run's callbacks are its methods, not closures of their own.
 */
abstract class DeadlineRun<R> {
  readonly #timeoutMs: number;
  readonly #storeResult: boolean;
  #settled = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #resolve: ((run: HandlerRun<R>) => void) | undefined;

  constructor(timeoutMs: number, storeResult: boolean) {
    this.#timeoutMs = timeoutMs;
    this.#storeResult = storeResult;
  }

  /** The deadline passed (abort what the handler holds). */
  protected abstract expired(err: DeadlineError): void;
  /** Runs once, before the outcome is resolved, whichever way the run ended (revoke handles). */
  protected abstract settled(): void;
  protected abstract published(): boolean;

  /** Calls `handler(envelope, ctx)` under the deadline; resolves with what it came to. */
  start(handler: Handler<R>, envelope: Envelope, ctx: HandlerContext): Promise<HandlerRun<R>> {
    const done = new Promise<HandlerRun<R>>((resolve) => {
      this.#resolve = resolve;
    });
    // The run is the timer's argument: no closure per message.
    this.#timer = setTimeout(onDeadline, this.#timeoutMs, this);
    let pending: Promise<R> | R;
    try {
      pending = handler(envelope, ctx);
    } catch (error) {
      this.#finish({ ok: false, error });
      return done;
    }
    Promise.resolve(pending).then(
      (result) => this.#finish(serialise(result, this.#storeResult, this.published())),
      (error: unknown) => this.#finish({ ok: false, error }),
    );
    return done;
  }

  /** The timer fired. */
  deadline(): void {
    if (this.#settled) return;
    const expired = new DeadlineError(this.#timeoutMs);
    this.expired(expired);
    this.#finish({ ok: false, error: expired });
  }

  #finish(run: HandlerRun<R>): void {
    if (this.#settled) return;
    this.#settled = true;
    clearTimeout(this.#timer);
    this.settled();
    this.#resolve!(run);
  }
}

function onDeadline(run: { deadline(): void }): void {
  run.deadline();
}

/** A transactional run: the revocable handle, the lazily made AbortController, `ctx.publish`. */
class TxRun<R> extends DeadlineRun<R> {
  readonly tx: TxHandle;
  readonly #outbox: Outbox | undefined;
  #abort: AbortController | undefined;
  #expired: DeadlineError | undefined;
  #published = false;

  constructor(client: PgClientLike, timeoutMs: number, storeResult: boolean, outbox: Outbox | undefined) {
    super(timeoutMs, storeResult);
    this.tx = new TxHandle(client, this);
    this.#outbox = outbox;
  }

  /** `ctx.signal`: made on first read, aborted at once if the deadline already passed. */
  signal(): AbortSignal {
    if (!this.#abort) {
      this.#abort = new AbortController();
      if (this.#expired) this.#abort.abort(this.#expired);
    }
    return this.#abort.signal;
  }

  publish(...args: Parameters<HandlerContext['publish']>): Promise<string> {
    return publishVia(this.#outbox, this.tx, this.#onPublish, ...args);
  }

  readonly #onPublish = (): void => {
    this.#published = true;
  };

  protected expired(err: DeadlineError): void {
    this.#expired = err;
    this.#abort?.abort(err);
  }

  protected settled(): void {
    this.tx.revoke();
  }

  protected published(): boolean {
    return this.#published;
  }
}

/** Lets a class stamp private fields onto an object made elsewhere (a constructor may return it). */
class Stamp {
  constructor(target: object) {
    // biome-ignore lint/correctness/noConstructorReturn: the point: the subclass's fields land on `target`
    return target;
  }
}

/**
 * Ties a context to its run with a private field: invisible to spreads, keys and proxies'
 * traps, and unlike a WeakMap entry, free for the garbage collector.
 */
class RunOf extends Stamp {
  readonly #run: TxRun<unknown>;

  private constructor(ctx: HandlerContext, run: TxRun<unknown>) {
    super(ctx);
    this.#run = run;
  }

  static stamp<R>(ctx: HandlerContext, run: TxRun<R>): void {
    new RunOf(ctx, run as TxRun<unknown>);
  }

  /** The run of a context, or of the context behind `receiver` (a proxy, an object made from it). */
  static signal(receiver: unknown): AbortSignal {
    if (typeof receiver === 'object' && receiver !== null && #run in receiver) return receiver.#run.signal();
    // A proxy of the context, or an object whose prototype it is: the getter's receiver is not the
    // context itself. Its `tx` is, unless replaced, the run's handle.
    const tx = (receiver as { tx?: unknown } | null | undefined)?.tx;
    const signal = tx instanceof TxHandle ? TxHandle.signalOf(tx) : undefined;
    if (!signal) throw new TypeError('ctx.signal: read it from the handler context itself');
    return signal;
  }
}

/** `ctx.signal`'s accessor, one for every context: own and enumerable, as a literal's getter is. */
const SIGNAL: PropertyDescriptor = {
  get(this: unknown): AbortSignal {
    return RunOf.signal(this);
  },
  enumerable: true,
  configurable: true,
};

/** The lease-mode runner's {@link DeadlineRun}: the spec's callbacks do the work. */
class SpecRun<R> extends DeadlineRun<R> {
  readonly #spec: DeadlineSpec;

  constructor(spec: DeadlineSpec) {
    super(spec.timeoutMs, spec.storeResult);
    this.#spec = spec;
  }

  protected expired(err: DeadlineError): void {
    this.#spec.onExpire(err);
  }

  protected settled(): void {
    this.#spec.onSettle();
  }

  protected published(): boolean {
    return this.#spec.published();
  }
}

/**
 * Runs `handler(envelope, ctx)` under its deadline and serialises its result when results are
 * stored. Never throws. The lease-mode runner's; the transactional one is {@link runHandler}.
 */
export function underDeadline<R>(
  spec: DeadlineSpec,
  handler: Handler<R>,
  envelope: Envelope,
  ctx: HandlerContext,
): Promise<HandlerRun<R>> {
  return new SpecRun<R>(spec).start(handler, envelope, ctx);
}
function serialise<R>(result: R, storeResult: boolean, published: boolean): HandlerRun<R> {
  if (!storeResult || result === undefined) return { ok: true, result, json: null, published };
  try {
    // Nothing to store for a function or a symbol; strings jsonb cannot hold are tagged (see jsonb.ts).
    return { ok: true, result, json: toJsonb(result), published };
  } catch (err) {
    const error = new PermanentError(
      `the handler's result is not JSON-serialisable (storeResult is on): ${String(err)}`,
      {
        cause: err,
      },
    );
    return { ok: false, error };
  }
}

/**
 * `ctx.step` of a transactional consumer. It refuses rather than run `fn` unrecorded: there an
 * external effect would repeat whenever the transaction rolls back, which is what lease mode is for.
 */
export function stepNeedsLease(name: string): Promise<never> {
  return Promise.reject(
    new OnceError(
      ErrorCode.StepNeedsLease,
      `ctx.step('${String(name)}') needs a consumer in lease mode: createInbox({ mode: 'lease', ... }); in transactional mode write effects through ctx.tx`,
    ),
  );
}
