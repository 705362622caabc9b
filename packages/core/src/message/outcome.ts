import type { SerializedError } from '../errors.js';
import type { Envelope } from './envelope.js';

/** Why a message ended `failed`. */
export type FailReason =
  /** The handler threw a permanent error (PermanentError, or `classify` said so). */
  | 'permanent'
  /** Transient failures reached `maxAttempts`. */
  | 'max-attempts'
  /** The message has no usable id. Nothing is recorded: there is no id to record it under. */
  | 'invalid-id'
  /**
   * An inbox over several databases could not place the message in one (`route()` threw, gave
   * an unknown name, or sent its id or key to a second database). Nothing is recorded: it has no
   * database to be recorded in.
   */
  | 'unroutable'
  /** The id was recorded `failed` earlier; dead-lettering is at least once, so do it again. */
  | 'previously-failed';

/** The handler ran and its transaction committed. */
export interface ProcessedOutcome<R = unknown> {
  /** The envelope this outcome is about. */
  envelope: Envelope;
  /**
   * The attempt the inbox judged, set only when it is not the envelope's: with
   * `ProcessOptions.starts.attemptIsStarts`, the starts counted in PostgreSQL. Read
   * `outcome.attempt ?? outcome.envelope.attempt`. @default absent
   */
  attempt?: number;
  /** The kind of outcome: what the adapter settles by. */
  status: 'processed';
  /** The message id (after `idOf`). */
  id: string;
  /** The handler's result: this run's, or the stored one for a duplicate (with `storeResult`); undefined otherwise. */
  result: R | undefined;
}
/** The id was processed before; `result` is the stored one when results are kept. */
export interface DuplicateOutcome<R = unknown> {
  /** The envelope this outcome is about. */
  envelope: Envelope;
  /**
   * The attempt the inbox judged, set only when it is not the envelope's: with
   * `ProcessOptions.starts.attemptIsStarts`, the starts counted in PostgreSQL. Read
   * `outcome.attempt ?? outcome.envelope.attempt`. @default absent
   */
  attempt?: number;
  /** The kind of outcome: what the adapter settles by. */
  status: 'duplicate';
  /** The message id (after `idOf`). */
  id: string;
  /** The handler's result: this run's, or the stored one for a duplicate (with `storeResult`); undefined otherwise. */
  result: R | undefined;
}
/** Same id as a processed message, different payload fingerprint. */
export interface ConflictOutcome {
  /** The envelope this outcome is about. */
  envelope: Envelope;
  /**
   * The attempt the inbox judged, set only when it is not the envelope's: with
   * `ProcessOptions.starts.attemptIsStarts`, the starts counted in PostgreSQL. Read
   * `outcome.attempt ?? outcome.envelope.attempt`. @default absent
   */
  attempt?: number;
  /** The kind of outcome: what the adapter settles by. */
  status: 'conflict';
  /** The message id (after `idOf`). */
  id: string;
  /** `dead-letter` under the `reject` policy, `ack` under `warn` and `ignore`. */
  action: 'dead-letter' | 'ack';
}
/** Recorded as failed (or not recordable at all): dead-letter it, then ack. */
export interface FailedOutcome {
  /** The envelope this outcome is about. */
  envelope: Envelope;
  /**
   * The attempt the inbox judged, set only when it is not the envelope's: with
   * `ProcessOptions.starts.attemptIsStarts`, the starts counted in PostgreSQL. Read
   * `outcome.attempt ?? outcome.envelope.attempt`. @default absent
   */
  attempt?: number;
  /** The kind of outcome: what the adapter settles by. */
  status: 'failed';
  /** The message id, or undefined when the message had no usable one. */
  id: string | undefined;
  /** Why the message failed. */
  reason: FailReason;
  /** What went wrong, serialised for logs and dead letters. */
  error: SerializedError;
}
/** A transient failure after the message was started; nothing is recorded. Redeliver after `delayMs`. */
export interface RetryOutcome {
  /** The envelope this outcome is about. */
  envelope: Envelope;
  /**
   * The attempt the inbox judged, set only when it is not the envelope's: with
   * `ProcessOptions.starts.attemptIsStarts`, the starts counted in PostgreSQL. Read
   * `outcome.attempt ?? outcome.envelope.attempt`. @default absent
   */
  attempt?: number;
  /** The kind of outcome: what the adapter settles by. */
  status: 'retry';
  /** The message id, or undefined when the message had no usable one. */
  id: string | undefined;
  /** What went wrong, serialised for logs and dead letters. */
  error: SerializedError;
  /** Redeliver after this many milliseconds. */
  delayMs: number;
  /**
   * True when the message's own failure caused the retry (its handler threw, or a statement failed
   * on what the handler did), so the attempt counts toward `maxAttempts`. False for faults of the
   * environment, decided by SQLSTATE in `classifyDbError`: connection loss, shutdown, resources,
   * read-only during failover, serialization failures and deadlocks, lock and statement timeouts.
   */
  spent: boolean;
}
/**
 * The handler never started, and nothing about this message is to blame: never spent, never
 * dead-lettered. Redeliver after `delayMs` (`unavailable`), or as soon as the message before it is
 * settled (`behind`).
 */
export interface NotRunOutcome {
  /** The envelope this outcome is about. */
  envelope: Envelope;
  /**
   * The attempt the inbox judged, set only when it is not the envelope's: with
   * `ProcessOptions.starts.attemptIsStarts`, the starts counted in PostgreSQL. Read
   * `outcome.attempt ?? outcome.envelope.attempt`. @default absent
   */
  attempt?: number;
  /** The kind of outcome: what the adapter settles by. */
  status: 'not-run';
  /** The message id, or undefined when the message had no usable one. */
  id: string | undefined;
  /**
   * `behind`: an earlier message in its batch, partition or group must be retried first.
   * `unavailable`: the database cannot be reached, or once's schema is missing or too new.
   * `held`: an inbox over several databases, whose `route` answered `HOLD` (a tenant being moved).
   */
  why: 'behind' | 'unavailable' | 'held';
  /** What went wrong, serialised for logs and dead letters. */
  error: SerializedError;
  /** Redeliver after this many milliseconds. */
  delayMs: number;
}
/** Another worker holds the id past the wait bound. Redeliver after `delayMs`. */
export interface BusyOutcome {
  /** The envelope this outcome is about. */
  envelope: Envelope;
  /**
   * The attempt the inbox judged, set only when it is not the envelope's: with
   * `ProcessOptions.starts.attemptIsStarts`, the starts counted in PostgreSQL. Read
   * `outcome.attempt ?? outcome.envelope.attempt`. @default absent
   */
  attempt?: number;
  /** The kind of outcome: what the adapter settles by. */
  status: 'busy';
  /** The message id (after `idOf`). */
  id: string;
  /** Redeliver after this many milliseconds. */
  delayMs: number;
}

/** What processing a message came to. Broker adapters act on its settle plan (`settlePlanOf` of `@once/core/adapter`). */
export type Outcome<R = unknown> =
  | ProcessedOutcome<R>
  | DuplicateOutcome<R>
  | ConflictOutcome
  | FailedOutcome
  | RetryOutcome
  | NotRunOutcome
  | BusyOutcome;
