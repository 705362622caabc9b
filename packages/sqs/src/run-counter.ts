import {
  AttemptsExhaustedError,
  type Envelope,
  type Handler,
  type Inbox,
  type Logger,
  type Outcome,
  serializeError,
} from '@once/core';

/** What {@link RunCounter} needs. */
export interface RunCounterSpec<R> {
  maxAttempts: number;
  /** The inbox that runs the guarded handler (made after it, hence a getter). */
  inbox: () => Inbox<R>;
  logger: Logger;
  /** Longest wait for a count before the handler runs, in ms; past it the handler runs uncounted. */
  waitMs: number;
}

/**
 * Counts a message's real runs in Postgres (core's `starts` table), so that the attempt number
 * core decides `max-attempts` by is the number of times the handler ran, never SQS's
 * ApproximateReceiveCount: that count rises for every receive, and in a FIFO group a message
 * waiting behind a failing one is received again and again without running. The receive count
 * only marks a delivery as suspect (above 1: redelivered).
 *
 * - A suspect delivery runs alone (run-chain marks it in {@link alone}); once the inbox has
 *   claimed it, just before the user's handler, one start is counted, committed on its own, and
 *   the count becomes the envelope's `attempt`. A count past `maxAttempts` means the earlier runs
 *   never finished (the message kills the process): it is failed unrun. A redelivery that ends
 *   `busy`, `duplicate` or not run counts nothing, since it never reaches the handler.
 * - A fresh delivery (received once) is attempt 1 and is not counted before it runs (that would
 *   cost every message a round trip); when its run ends in a spent retry, the run is counted then.
 * - A counted run that ends in a retry that does not count (a fault of the environment) is taken
 *   back, so lost connections and deadlocks never push a message towards `max-attempts`.
 *
 * A count that cannot be taken (the database refuses, or with a pool of one the second
 * connection never comes) leaves the receive count as the attempt: an upper bound of the runs,
 * so a message still ends, at worst early.
 */
export class RunCounter<R> {
  readonly #s: RunCounterSpec<R>;
  /** Suspect deliveries about to run alone: the ones whose starts are counted before they run. */
  readonly alone = new WeakSet<Envelope>();
  /** Deliveries whose run was counted before it ran (a delivery counts once, however often core reruns it). */
  readonly #counted = new WeakSet<Envelope>();

  constructor(spec: RunCounterSpec<R>) {
    this.#s = spec;
  }

  /** The handler the inbox runs: counts a suspect delivery's start, then runs the user's `handler`. */
  guard(handler: Handler<R>): Handler<R> {
    return async (envelope, ctx) => {
      if (this.alone.has(envelope) && !this.#counted.has(envelope)) {
        const starts = await this.#count(envelope);
        if (starts !== undefined) {
          this.#counted.add(envelope);
          // Core reads the attempt from the envelope when it judges this run's failure.
          envelope.attempt = starts;
          if (starts > this.#s.maxAttempts) throw new AttemptsExhaustedError(starts, this.#s.maxAttempts);
        }
      }
      return handler(envelope, ctx);
    };
  }

  /**
   * Brings the count in line with how the run ended; call it before the message is settled, so
   * that a redelivery reads the new count. Best effort: a refusal is logged, the count stays.
   */
  async settled(outcome: Outcome<R>): Promise<void> {
    if (outcome.status !== 'retry') return;
    const { envelope } = outcome;
    const counted = this.#counted.has(envelope);
    try {
      if (outcome.spent && !counted) await this.#s.inbox().noteStart(envelope);
      else if (!outcome.spent && counted) {
        await this.#s.inbox().forgetStart(envelope);
        this.#counted.delete(envelope);
      }
    } catch (err) {
      this.#s.logger.debug('once/sqs: could not update a run count', { error: serializeError(err).message });
    }
  }

  /** The start count, or undefined (best effort: the database refused, or the wait ran out). */
  async #count(envelope: Envelope): Promise<number | undefined> {
    const { waitMs, logger } = this.#s;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => {
        logger.warn(
          'once/sqs: could not count a start in time (is the pool smaller than 2?); running uncounted',
          { waitMs },
        );
        resolve(undefined);
      }, waitMs);
    });
    try {
      return await Promise.race([this.#s.inbox().noteStart(envelope), late]);
    } catch (err) {
      logger.debug('once/sqs: could not count a start', { error: serializeError(err).message });
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}
