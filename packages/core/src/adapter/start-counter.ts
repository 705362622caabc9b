import type { Envelope } from '../envelope.js';
import { AttemptsExhaustedError, serializeError } from '../errors.js';
import type { Handler } from '../handler.js';
import type { Inbox } from '../inbox.js';

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

  constructor(spec: StartCounterSpec<R>) {
    this.#spec = spec;
  }

  /** This envelope runs alone: count its start before its handler runs. */
  mark(envelope: Envelope): void {
    this.#alone.add(envelope);
  }

  /** The handler the inbox runs: the user's, behind the count. */
  wrap(handler: Handler<R>): Handler<R> {
    return async (envelope, ctx) => {
      if (this.#alone.has(envelope)) {
        const starts = await this.#count(envelope);
        const { maxAttempts } = this.#spec.inbox().options;
        if (starts !== undefined && starts > maxAttempts) {
          this.#spec.onExhausted?.(envelope, starts);
          throw new AttemptsExhaustedError(starts, maxAttempts);
        }
      }
      return handler(envelope, ctx);
    };
  }

  /** The start count, or undefined (best effort: the database refused, or the wait ran out). */
  async #count(envelope: Envelope): Promise<number | undefined> {
    const { waitMs } = this.#spec;
    const { logger } = this.#spec.inbox().options;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => {
        logger.warn(
          'once: could not count a start in time (is the pool smaller than 2?); running uncounted',
          {
            waitMs,
          },
        );
        resolve(undefined);
      }, waitMs);
    });
    try {
      return await Promise.race([this.#spec.inbox().noteStart(envelope), late]);
    } catch (err) {
      logger.debug('once: could not count a start', { error: serializeError(err).message });
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}
