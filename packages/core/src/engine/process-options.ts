import type { Handler } from '../handler/handler.js';
import type { Envelope } from '../message/envelope.js';

/** Per-call options of `Inbox.process` and `Inbox.processBatch`. */
export interface ProcessOptions<R = unknown> {
  /** The handler for this call's messages, instead of the inbox's `handler`. @default the inbox's */
  handler?: Handler<R>;
  /**
   * The killer budget of the call. A message that kills the process never reaches a catch block, so an adapter that runs a suspect delivery
   * (redelivered after a death, run alone) asks the inbox to count its starts in PostgreSQL. The
   * inbox counts a start once it has claimed the id, just before the handler runs, committed on its
   * own: a redelivery that ends `duplicate` or `busy` spends nothing. Past `maxAttempts` starts the
   * handler is not run: the message is recorded `failed` (`max-attempts`) and the adapter
   * dead-letters it. @default none: no start is counted
   */
  starts?: {
    /**
     * The delivery may be the one that killed the process: count its start before its handler runs.
     * Suspect deliveries run one per transaction, a batch of them too.
     */
    suspect: boolean;
    /**
     * The broker counts deliveries, not runs (SQS's receive count rises for a FIFO message that
     * waits behind a failing one, never running): the counted starts are the attempt the failure
     * policy judges, a suspect delivery is counted once per call however often the inbox runs it,
     * and the count is kept in line with how a run ended: a fresh delivery whose retry is spent is
     * counted after it, a counted run whose retry is not spent (a fault of the environment) is
     * taken back. The envelope's `attempt` is left as delivered. @default false
     */
    attemptIsStarts?: boolean;
    /** Called when a delivery is refused for having been started more than `maxAttempts` times. */
    onExhausted?: (envelope: Envelope, starts: number) => void;
  };
}

/** {@link ProcessOptions.starts}, for the engine. */
export type StartBudget = NonNullable<ProcessOptions['starts']>;
