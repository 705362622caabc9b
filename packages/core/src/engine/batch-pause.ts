/**
 * Owns one decision: whether fresh messages may share a transaction right now. A batch that met a
 * deadlock or serialization failure among its handlers' writes (the messages' own rows crossing
 * between concurrent batches: several messages of one account spread over receives, say) is found
 * only after deadlock_timeout while other batches queue behind it. So for the next
 * {@link BATCH_PAUSE_MS} the inbox runs fresh messages one per transaction, which cannot deadlock
 * on one row each; then it tries batching again.
 */

import type { Logger } from '../logger.js';
import { classifyDbError } from '../pg/sqlstate.js';

/** How long batching pauses after a batch deadlocked on its handlers' rows. */
export const BATCH_PAUSE_MS = 30_000;

export class BatchPause {
  readonly #logger: Logger;
  readonly #consumer: string;
  /** Until when (performance.now() ms) fresh messages are not batched. */
  #until = 0;

  constructor(logger: Logger, consumer: string) {
    this.#logger = logger;
    this.#consumer = consumer;
  }

  /** Whether batches may run now. */
  get open(): boolean {
    return performance.now() >= this.#until;
  }

  /** A batch failed with `error`: pause batching if it was a race among the handlers' rows. */
  note(error: unknown): void {
    if (classifyDbError(error) !== 'conflict-retry') return;
    if (this.open) {
      this.#logger.info(
        {
          consumer: this.#consumer,
          pauseMs: BATCH_PAUSE_MS,
        },
        'once: a batch deadlocked on the handlers’ rows; batching paused',
      );
    }
    this.#until = performance.now() + BATCH_PAUSE_MS;
  }
}
