import type { SerializedError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Outcome } from '../message/outcome.js';

/** What a {@link FailureLog} writes to, and how often it may repeat itself. */
export interface FailureLogSpec {
  logger: Logger;
  consumer: string;
  /** The line's prefix: `once/kafka`, or `once` for a bare inbox. */
  prefix: string;
  /** The same error of the same message logs at most once per this many ms. @default 60000 */
  repeatMs?: number;
  /** Messages whose repeats are tracked at once; the oldest is forgotten past it. @default 10000 */
  maxTracked?: number;
  /** The clock, in ms (tests). @default Date.now */
  now?: () => number;
}

/** A run of a message's own that failed: the handler threw, or passed its deadline. */
export interface HandlerFailure {
  id: string | undefined;
  /** This run's attempt, 1-based, and the budget. */
  attempt: number;
  maxAttempts: number;
  error: SerializedError;
  /** What happens next, in words: `retry in 200 ms`, `dead-letter to orders.dlq`. */
  next: string;
  /** Where the delivery came from (offset, sequence, receipt, …), flattened into the line. */
  where?: Record<string, unknown>;
}

/**
 * The owner of the lines a failing consumer writes, so a failure is seen when it happens rather
 * than when its message is dead-lettered, and an outage does not flood the log:
 * - a message's own failure (the handler threw) logs one `warn` per failed run, with the attempt
 *   of the budget, the error and what happens next; the same error of the same message logs at
 *   most once per `repeatMs`, the next line carrying how many were left out;
 * - an environment fault (the database or the broker unusable) logs once per episode, however many
 *   messages it holds back, and its end logs once with how long it lasted.
 */
export class FailureLog {
  readonly #spec: Required<Omit<FailureLogSpec, 'logger' | 'consumer' | 'prefix'>> & FailureLogSpec;
  /** Per message and error: when it last logged, and the failures left out since. */
  readonly #repeats = new Map<string, { at: number; left: number }>();
  #episode: { since: number; held: number; error: SerializedError } | undefined;

  constructor(spec: FailureLogSpec) {
    this.#spec = { repeatMs: 60_000, maxTracked: 10_000, now: Date.now, ...spec };
  }

  /**
   * Reads an outcome as it is emitted. A retry of the message's own (`spent`) is a handler failure;
   * an unspent retry or a `not-run` for an unusable database is the environment; anything that ran
   * through ends an episode. `finals`: also log a message's permanent failure (a bare inbox, where no
   * dead-letter line follows; a consumer's dead-letter line carries the error instead).
   */
  note(o: Outcome, maxAttempts: number, finals: boolean): void {
    switch (o.status) {
      case 'processed':
      case 'duplicate':
        if (this.#episode !== undefined) this.available();
        return;
      case 'retry':
        if (!o.spent) this.unavailable(o.error);
        else {
          this.handlerFailed({
            id: o.id,
            attempt: o.attempt ?? o.envelope.attempt,
            maxAttempts,
            error: o.error,
            next: `retry in ${o.delayMs} ms`,
          });
        }
        return;
      case 'not-run':
        if (o.why === 'unavailable') this.unavailable(o.error);
        return;
      case 'failed':
        if (finals && o.reason === 'permanent') {
          this.handlerFailed({
            id: o.id,
            attempt: o.attempt ?? o.envelope.attempt,
            maxAttempts,
            error: o.error,
            next: 'recorded failed, not retried (once failed list)',
          });
        }
        return;
      default:
        return;
    }
  }

  /** A failed run of a message's own: logged, unless the same error of it logged within `repeatMs`. */
  handlerFailed(f: HandlerFailure): void {
    const { logger, consumer, prefix, repeatMs, now } = this.#spec;
    const key = `${f.id ?? ''}\u0000${f.error.code ?? ''}\u0000${f.error.message}`;
    const t = now();
    const seen = this.#repeats.get(key);
    if (seen !== undefined && t - seen.at < repeatMs) {
      seen.left++;
      return;
    }
    this.#repeats.delete(key);
    this.#track(key, t);
    logger.warn(
      {
        consumer,
        id: f.id,
        attempt: `${f.attempt} of ${f.maxAttempts}`,
        error: f.error.message,
        code: f.error.code,
        next: f.next,
        ...(seen !== undefined && seen.left > 0 ? { repeated: seen.left } : {}),
        ...f.where,
      },
      `${prefix}: handler failed`,
    );
  }

  /** The database (or the broker) cannot be used: the first message held in an episode logs it. */
  unavailable(error: SerializedError): void {
    if (this.#episode !== undefined) {
      this.#episode.held++;
      return;
    }
    this.#episode = { since: this.#spec.now(), held: 1, error };
    this.#spec.logger.warn(
      { consumer: this.#spec.consumer, error: error.message, code: error.code },
      `${this.#spec.prefix}: database unavailable; messages wait and are not counted as attempts until it is back`,
    );
  }

  /** Something ran again: an episode in progress ends, with one line. */
  available(): void {
    const e = this.#episode;
    if (e === undefined) return;
    this.#episode = undefined;
    this.#spec.logger.warn(
      {
        consumer: this.#spec.consumer,
        afterMs: this.#spec.now() - e.since,
        held: e.held,
        error: e.error.message,
      },
      `${this.#spec.prefix}: database available again`,
    );
  }

  /** Whether an environment episode is in progress. */
  get inEpisode(): boolean {
    return this.#episode !== undefined;
  }

  #track(key: string, at: number): void {
    const { maxTracked, repeatMs } = this.#spec;
    if (this.#repeats.size >= maxTracked) {
      // Forget what can no longer be a repeat; failing that, the oldest entry (insertion order).
      for (const [k, v] of this.#repeats) if (at - v.at >= repeatMs) this.#repeats.delete(k);
      if (this.#repeats.size >= maxTracked) {
        const oldest = this.#repeats.keys().next().value;
        if (oldest !== undefined) this.#repeats.delete(oldest);
      }
    }
    this.#repeats.set(key, { at, left: 0 });
  }
}
