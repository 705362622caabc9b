import { type SerializedError, serializeError } from '../errors.js';
import type { Envelope } from '../message/envelope.js';
import type { FailReason, Outcome, RetryOutcome } from '../message/outcome.js';
import type { ResolvedInboxOptions } from './options.js';

/** Builds outcomes from an inbox's options: one place for both the transactional and the lease path. */
export class Outcomes<R> {
  readonly #o: ResolvedInboxOptions<R>;

  constructor(options: ResolvedInboxOptions<R>) {
    this.#o = options;
  }

  /**
   * A started message to run again; `spent`: the attempt counts toward maxAttempts (see
   * RetryOutcome). `attempt`: the one judged, when it is not the envelope's (counted starts).
   */
  retry(
    envelope: Envelope,
    id: string | undefined,
    error: unknown,
    spent: boolean,
    attempt = envelope.attempt,
  ): RetryOutcome {
    const o: RetryOutcome = {
      status: 'retry',
      id,
      envelope,
      error: serializeError(error),
      delayMs: Math.max(0, Math.floor(this.#o.retryDelayMs(Math.max(1, attempt)))),
      spent,
    };
    if (attempt !== envelope.attempt) o.attempt = attempt;
    return o;
  }

  /** A message that never started because an earlier one (in its batch or group) must be retried first. */
  notRun(envelope: Envelope, id: string | undefined = envelope.id): Outcome<R> {
    return {
      status: 'not-run',
      id,
      envelope,
      why: 'behind',
      // No Error behind it, so no stack to capture: a stack here would only point at this line.
      error: { name: 'Error', message: 'not run: an earlier message must be retried first' },
      delayMs: 0,
    };
  }

  /** A message that never started because the database or once's schema cannot be used. */
  unavailable(envelope: Envelope, id: string | undefined, error: unknown): Outcome<R> {
    return {
      status: 'not-run',
      id,
      envelope,
      why: 'unavailable',
      error: serializeError(error),
      delayMs: this.#delay(envelope),
    };
  }

  /** A message of a tenant its router holds (`HOLD`): not run, its attempt unspent, given back after the delay. */
  held(envelope: Envelope, id: string | undefined): Outcome<R> {
    return {
      status: 'not-run',
      id,
      envelope,
      why: 'held',
      error: {
        name: 'Error',
        message: 'not run: route() holds this message (HOLD), as while its tenant moves',
      },
      delayMs: this.#delay(envelope),
    };
  }

  #delay(envelope: Envelope): number {
    return Math.max(0, Math.floor(this.#o.retryDelayMs(Math.max(1, envelope.attempt))));
  }

  busy(envelope: Envelope, id: string, delayMs: number): Outcome<R> {
    return { status: 'busy', id, envelope, delayMs };
  }

  /** `attempt`: the one judged, when it is not the envelope's (counted starts). */
  failed(
    envelope: Envelope,
    id: string | undefined,
    reason: FailReason,
    error: unknown,
    attempt = envelope.attempt,
  ): Outcome<R> {
    const o: Outcome<R> = { status: 'failed', id, envelope, reason, error: serializeError(error) };
    if (attempt !== envelope.attempt) o.attempt = attempt;
    return o;
  }

  /** A `conflict` outcome when the fingerprints differ and the policy says so; else undefined. */
  conflict(envelope: Envelope, id: string, sameFingerprint: boolean): Outcome<R> | undefined {
    const policy = this.#o.conflictPolicy;
    if (sameFingerprint || policy === 'ignore') return undefined;
    if (policy === 'warn') {
      this.#o.logger.warn(
        {
          consumer: this.#o.consumer,
          id,
        },
        'once: same message id, different payload; treated as a duplicate',
      );
    }
    return { status: 'conflict', id, envelope, action: policy === 'reject' ? 'dead-letter' : 'ack' };
  }

  /** The user's `classify`, guarded: a throwing classifier means transient. */
  readonly classify = (error: unknown): 'transient' | 'permanent' => {
    try {
      return this.#o.classify?.(error) ?? 'transient';
    } catch (err) {
      this.#o.logger.warn({ error: String(err) }, 'once: classify() threw; treating the error as transient');
      return 'transient';
    }
  };

  serialize(error: unknown): SerializedError {
    return serializeError(error);
  }
}
