import type { Envelope } from './envelope.js';
import { ErrorCode, OnceError, PermanentError } from './errors.js';
import type { Handler, HandlerContext } from './handler.js';
import { idempotencyKey } from './lease/idempotency-key.js';
import { stepNeedsLease } from './lease/steps.js';
import type { Outbox, Queryable } from './outbox.js';
import type { PgClientLike } from './pg-like.js';
import { toJsonb } from './sql/jsonb.js';
import { TxHandle } from './tx-handle.js';

/** The handler ran past `handlerTimeoutMs`. */
export class DeadlineError extends OnceError {
  constructor(ms: number) {
    super(ErrorCode.HandlerTimeout, `handler did not settle within handlerTimeoutMs (${ms} ms)`, {
      retryable: true,
    });
  }
}

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
 */
export function runHandler<R>(spec: RunSpec<R>, envelope: Envelope): Promise<HandlerRun<R>> {
  const tx = new TxHandle(spec.client);
  let abort: AbortController | undefined;
  let expired: DeadlineError | undefined;
  let published = false;
  const ctx: HandlerContext = {
    tx,
    id: spec.id,
    consumer: spec.consumer,
    attempt: envelope.attempt,
    publish: publisherFor(spec.outbox, tx, () => {
      published = true;
    }),
    get signal() {
      if (!abort) {
        abort = new AbortController();
        if (expired) abort.abort(expired);
      }
      return abort.signal;
    },
    step: stepNeedsLease,
    idempotencyKey: (step) => idempotencyKey(spec.consumer, spec.id, step),
  };
  if (spec.transaction !== undefined) ctx.transaction = spec.transaction;
  return underDeadline<R>(
    {
      timeoutMs: spec.timeoutMs,
      storeResult: spec.storeResult,
      onExpire: (err) => {
        expired = err;
        abort?.abort(err);
      },
      onSettle: () => tx.revoke(),
      published: () => published,
    },
    () => spec.handler(envelope, ctx),
  );
}

/** `ctx.publish`: enqueue into `tx` through the inbox's outbox, or say how to configure one. */
export function publisherFor(
  outbox: Outbox | undefined,
  tx: Queryable,
  onPublish: () => void,
): HandlerContext['publish'] {
  return (destination, body, options) => {
    if (!outbox) {
      return Promise.reject(
        new OnceError(
          ErrorCode.InvalidOption,
          'ctx.publish needs an outbox: pass options.outbox = createOutbox(...)',
        ),
      );
    }
    onPublish();
    return outbox.enqueue(tx, destination, body, options);
  };
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
 * Runs `invoke` (a handler call) under its deadline and serialises its result when results are
 * stored. Never throws. Shared by the transactional and the lease-mode runner.
 */
export function underDeadline<R>(spec: DeadlineSpec, invoke: () => Promise<R> | R): Promise<HandlerRun<R>> {
  return new Promise<HandlerRun<R>>((resolve) => {
    let settled = false;
    const finish = (run: HandlerRun<R>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      spec.onSettle();
      resolve(run);
    };
    const timer = setTimeout(() => {
      const expired = new DeadlineError(spec.timeoutMs);
      spec.onExpire(expired);
      finish({ ok: false, error: expired });
    }, spec.timeoutMs);
    let pending: Promise<R> | R;
    try {
      pending = invoke();
    } catch (error) {
      finish({ ok: false, error });
      return;
    }
    Promise.resolve(pending).then(
      (result) => finish(serialise(result, spec.storeResult, spec.published())),
      (error: unknown) => finish({ ok: false, error }),
    );
  });
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
