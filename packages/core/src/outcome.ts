import type { Envelope } from './envelope.js';
import type { SerializedError } from './errors.js';

/** Why a message ended `failed`. */
export type FailReason =
  /** The handler threw a permanent error (PermanentError, or `classify` said so). */
  | 'permanent'
  /** Transient failures reached `maxAttempts`. */
  | 'max-attempts'
  /** The message has no usable id. Nothing is recorded: there is no id to record it under. */
  | 'invalid-id'
  /** The id was recorded `failed` earlier; dead-lettering is at least once, so do it again. */
  | 'previously-failed';

interface Base {
  envelope: Envelope;
}

/** The handler ran and its transaction committed. */
export interface ProcessedOutcome<R = unknown> extends Base {
  status: 'processed';
  id: string;
  result: R | undefined;
}
/** The id was processed before; `result` is the stored one when results are kept. */
export interface DuplicateOutcome<R = unknown> extends Base {
  status: 'duplicate';
  id: string;
  result: R | undefined;
}
/** Same id as a processed message, different payload fingerprint. */
export interface ConflictOutcome extends Base {
  status: 'conflict';
  id: string;
  /** `dead-letter` under the `reject` policy, `ack` under `warn` and `ignore`. */
  action: 'dead-letter' | 'ack';
}
/** Recorded as failed (or not recordable at all): dead-letter it, then ack. */
export interface FailedOutcome extends Base {
  status: 'failed';
  id: string | undefined;
  reason: FailReason;
  error: SerializedError;
}
/** A transient failure; nothing is recorded. Redeliver after `delayMs`. */
export interface RetryOutcome extends Base {
  status: 'retry';
  id: string | undefined;
  error: SerializedError;
  delayMs: number;
  /** False when the message never ran because an earlier one in its batch failed. */
  ran: boolean;
  /**
   * True when the handler's own failure caused the retry, so the attempt counts toward
   * `maxAttempts`. False for database faults, lost commits, wait bounds and neighbours that never
   * ran: adapters that count attempts themselves should not raise the count then.
   */
  spent: boolean;
}
/** Another worker holds the id past the wait bound. Redeliver after `delayMs`. */
export interface BusyOutcome extends Base {
  status: 'busy';
  id: string;
  delayMs: number;
}

/** What processing a message came to: each adapter maps it to a settle action. */
export type Outcome<R = unknown> =
  | ProcessedOutcome<R>
  | DuplicateOutcome<R>
  | ConflictOutcome
  | FailedOutcome
  | RetryOutcome
  | BusyOutcome;

/** What the broker should do with a delivery. */
export type SettleAction = 'ack' | 'retry' | 'dead-letter';

/** The one mapping from outcome to broker action, shared by every adapter. */
export function settleActionOf(outcome: Outcome): SettleAction {
  switch (outcome.status) {
    case 'processed':
    case 'duplicate':
      return 'ack';
    case 'conflict':
      return outcome.action;
    case 'failed':
      return 'dead-letter';
    case 'retry':
    case 'busy':
      return 'retry';
  }
}
