import type { Envelope } from '../envelope.js';
import { AttemptsExhaustedError, serializeError } from '../errors.js';
import type { Handler } from '../handler.js';
import type { Inbox } from '../inbox.js';
import type { SettlePlan } from './settle-plan.js';

/** What a {@link StartCounter} needs. */
export interface StartCounterSpec<R> {
  /**
   * The inbox that runs the wrapped handler (made after it, hence a getter). Its `maxAttempts`
   * is the budget: starts allowed before a message is taken for the one killing the process.
   */
  inbox: () => Inbox<R>;
  /** Longest wait for the count, in ms; past it the handler runs uncounted (with a warning). */
  waitMs: number;
  /** Called when a message is refused for having been started more than `maxAttempts` times. */
  onExhausted?: (envelope: Envelope, starts: number) => void;
  /**
   * The broker counts deliveries, not runs (SQS's receive count rises for a FIFO message that
   * waits behind a failing one, never running): the counted starts become the envelope's
   * `attempt`, a delivery is counted once however often core runs it, and {@link
   * StartCounter.settled} keeps the count in line with how runs end. @default false
   */
  attemptIsStarts?: boolean;
}

/**
 * The killer budget. A message that kills the process never reaches a catch block, so its
 * failures are counted as starts in PostgreSQL (`Inbox.noteStart`, committed on its own just
 * before the user's handler runs). The adapter marks the suspect deliveries it runs alone
 * (redelivered after a death: each holds the process-wide gate exclusive), so when one of them
 * kills the process nothing else was running and only its own count rose. Past `maxAttempts`
 * starts, the wrapped handler throws `AttemptsExhaustedError` instead of running it: core records
 * it `failed` (`max-attempts`) and the adapter dead-letters it.
 *
 * Counting inside the handler, once the inbox has claimed the id, means only a start that reaches
 * the handler counts: a redelivery that ends `duplicate` or `busy` spends nothing. In
 * transactional mode the count needs a second pool connection beside the handler's transaction,
 * so the wait is bounded (a pool of one would wait forever) and the handler then runs uncounted.
 */
export class StartCounter<R> {
  readonly #spec: StartCounterSpec<R>;
  readonly #alone = new WeakSet<Envelope>();
  /** With `attemptIsStarts`: deliveries whose start was counted (once each). */
  readonly #counted = new WeakSet<Envelope>();

  constructor(spec: StartCounterSpec<R>) {
    this.#spec = spec;
  }

  /** This envelope runs alone: count its start before its handler runs. */
  mark(envelope: Envelope): void {
    this.#alone.add(envelope);
  }

  /** The handler the inbox runs: the user's, behind the count. */
  wrap(handler: Handler<R>): Handler<R> {
    // A delivery not marked (every fresh one) goes straight to the handler: no promise of our own
    // around it. Core's runner calls a handler inside try/catch and awaits what it returns, so a
    // synchronous throw and a rejection end the same way.
    return (envelope, ctx) =>
      this.#alone.has(envelope) ? this.#runMarked(handler, envelope, ctx) : handler(envelope, ctx);
  }

  /** A marked delivery: its start is counted before the handler runs, and refused past the budget. */
  async #runMarked(handler: Handler<R>, envelope: Envelope, ctx: Parameters<Handler<R>>[1]): Promise<R> {
    const once = this.#spec.attemptIsStarts === true;
    if (!(once && this.#counted.has(envelope))) {
      const starts = await this.#count(envelope);
      if (once && starts !== undefined) {
        this.#counted.add(envelope);
        // Core reads the attempt from the envelope when it judges this run's failure.
        envelope.attempt = starts;
      }
      const { maxAttempts } = this.#spec.inbox().options;
      if (starts !== undefined && starts > maxAttempts) {
        this.#spec.onExhausted?.(envelope, starts);
        throw new AttemptsExhaustedError(starts, maxAttempts);
      }
    }
    return handler(envelope, ctx);
  }

  /**
   * With `attemptIsStarts`: brings the count in line with how a run ended; call it before the
   * delivery is settled, so that its redelivery reads the new count. A fresh delivery (not
   * counted before it ran, to spare every message a round trip) whose retry is spent is counted
   * now; a counted run whose retry is not spent (a fault of the environment: a lost connection, a
   * deadlock) is taken back, so such faults never push a message towards `maxAttempts`. Best
   * effort: a refusal is logged at debug level and the count stays.
   */
  async settled(envelope: Envelope, plan: SettlePlan): Promise<void> {
    // Only a run that failed (a `retry` plan with its failure) changes a count.
    if (!this.#spec.attemptIsStarts || plan.kind !== 'retry' || plan.failure === undefined) return;
    const inbox = this.#spec.inbox();
    const counted = this.#counted.has(envelope);
    try {
      if (plan.spent && !counted) await inbox.noteStart(envelope);
      else if (!plan.spent && counted) {
        await inbox.forgetStart(envelope);
        this.#counted.delete(envelope);
      }
    } catch (err) {
      inbox.options.logger.debug(
        {
          error: serializeError(err).message,
        },
        'once: could not update a start count',
      );
    }
  }

  /** The start count, or undefined (best effort: the database refused, or the wait ran out). */
  async #count(envelope: Envelope): Promise<number | undefined> {
    const { waitMs } = this.#spec;
    const { logger } = this.#spec.inbox().options;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => {
        logger.warn(
          {
            waitMs,
          },
          'once: could not count a start in time (is the pool smaller than 2?); running uncounted',
        );
        resolve(undefined);
      }, waitMs);
    });
    try {
      return await Promise.race([this.#spec.inbox().noteStart(envelope), late]);
    } catch (err) {
      logger.debug({ error: serializeError(err).message }, 'once: could not count a start');
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}
