import type { Handler, HandlerContext } from '../handler/handler.js';
import { type HandlerRun, publisherFor, underDeadline } from '../handler/run-handler.js';
import type { Envelope } from '../message/envelope.js';
import { idempotencyKey } from '../message/idempotency-key.js';
import type { Outbox } from '../outbox/outbox.js';
import { LeaseErrorCode, stepError } from './lease-errors.js';
import type { LeaseTx } from './lease-tx.js';
import type { Steps } from './steps.js';

/** One lease-mode handler run; `json` is the serialised result when results are stored. */
export type LeaseRun<R> = HandlerRun<R>;

/** Everything {@link runLeaseHandler} needs besides the envelope. */
export interface LeaseRunSpec<R> {
  handler: Handler<R>;
  consumer: string;
  id: string;
  /** The inbox's count of claims of this id, this one included. */
  attempt: number;
  timeoutMs: number;
  storeResult: boolean;
  tx: LeaseTx;
  steps: Steps;
  /** Aborted on the deadline here, and by the lease clock when the lease is lost. */
  abort: AbortController;
  outbox: Outbox | undefined;
}

/**
 * Runs a lease-mode handler under its deadline. Never throws. At settle the transaction handle
 * is revoked and steps are closed: a step the handler left running may still record its result
 * (fenced by the lease), but no new step starts.
 */
export function runLeaseHandler<R>(spec: LeaseRunSpec<R>, envelope: Envelope): Promise<LeaseRun<R>> {
  let published = false;
  const ctx: HandlerContext = {
    tx: spec.tx,
    id: spec.id,
    consumer: spec.consumer,
    attempt: spec.attempt,
    signal: spec.abort.signal,
    step: (name, fn) => spec.steps.step(name, fn),
    idempotencyKey: (step) => idempotencyKey(spec.consumer, spec.id, step),
    publish: publisherFor(spec.outbox, spec.tx, () => {
      published = true;
    }),
  };
  return underDeadline<R>(
    {
      timeoutMs: spec.timeoutMs,
      storeResult: spec.storeResult,
      onExpire: (err) => spec.abort.abort(err),
      onSettle: () => {
        spec.tx.revoke();
        spec.steps.close(
          stepError(
            LeaseErrorCode.StepAfterSettle,
            'ctx.step was called after the handler settled: await every step inside the handler',
          ),
        );
      },
      published: () => published,
    },
    spec.handler,
    envelope,
    ctx,
  );
}
