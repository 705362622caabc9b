import type { ResolvedInboxOptions } from '../engine/options.js';
import type { SerializedError } from '../errors.js';
import type { EnvelopeSource } from '../message/envelope.js';
import type { Outcome } from '../message/outcome.js';
import { type DeadLetterRecord, deadLetterRecordOf } from './dead-letter-record.js';

/**
 * Deliver again after `delayMs`, as attempt `attempt`. `id` and `outcome`, as on every plan: the
 * message id core decided on (undefined without a usable one), and the outcome's status, to report
 * (the `settled` event, a log line), never to decide on.
 */
export interface RetryPlan {
  /** Which plan this is: deliver the message again later. */
  kind: 'retry';
  /** The message id core decided on; undefined when the message had no usable one. */
  id: string | undefined;
  /** The outcome's status, to report (the `settled` event, a log line), never to decide on. */
  outcome: 'retry' | 'not-run' | 'busy';
  /** How long to wait before the redelivery, in milliseconds (the backoff, or the busy or not-run delay). */
  delayMs: number;
  /**
   * The attempt of the redelivery: raised by one only when the failure was the message's own
   * (`spent`). Adapters that carry the attempt in a header write this number.
   */
  attempt: number;
  /**
   * True when this run counts toward `maxAttempts`: the handler threw, or a statement failed on
   * what it did. False for faults of the environment and for a message that never ran.
   */
  spent: boolean;
  /**
   * The error of this run when the message ran and failed (its handler or its transaction threw).
   * Undefined when it did not run: another worker holds its id (`busy`), or the database or
   * schema cannot be used (`not-run`).
   */
  failure: SerializedError | undefined;
}

/** Send a copy with `record` to the dead-letter destination, then ack the original. */
export interface DeadLetterPlan {
  /** Which plan this is: the message failed for good and leaves the source. */
  kind: 'dead-letter';
  /** The message id core decided on; undefined when the message had no usable one. */
  id: string | undefined;
  /** The outcome's status, to report (the `settled` event, a log line), never to decide on. */
  outcome: 'failed' | 'conflict';
  /** What the copy carries (the `once-dead-letter` header or attribute): reason, error, origin. */
  record: DeadLetterRecord;
  /**
   * True when core wrote a `failed` inbox row for the message (body, error, origin; `once failed
   * list`): a permanent failure or exhausted attempts with `recordFailed` on, or a redelivery of
   * an id recorded failed before. An invalid id has no key to record under and a conflict's id
   * belongs to the processed message, so with dead-lettering off a log line is all that is left.
   */
  recorded: boolean;
  /** Where the message came from (its envelope's source), for the `message:dead-lettered` event. */
  source: EnvelopeSource;
}

/**
 * What an adapter does with a delivery once core has decided: the only thing adapters read of an
 * outcome. Core makes every decision (did it fail, does the attempt count, is it recorded, where
 * does it go); the adapter turns the plan into its broker's calls. Every plan carries `id` and
 * `outcome` (the outcome's status), the fields of an adapter's `settled` event.
 */
export type SettlePlan =
  /** Processed, a duplicate, or a conflict under the `warn`/`ignore` policy: ack, commit, delete. */
  | {
      /** Which plan this is: settle the delivery as done. */
      kind: 'ack';
      /** The message id core decided on; undefined when the message had no usable one. */
      id: string | undefined;
      /** The outcome's status, to report, never to decide on. */
      outcome: 'processed' | 'duplicate' | 'conflict';
    }
  | RetryPlan
  /**
   * The handler never started because an earlier message in its batch, partition or group must
   * go first: run it again, unchanged (same attempt), once that one is settled. Never spent.
   */
  | {
      /** Which plan this is: run the message again, unchanged, after the earlier one settles. */
      kind: 'rerun';
      /** The message id core decided on; undefined when the message had no usable one. */
      id: string | undefined;
      /** The outcome's status, always `not-run` here. */
      outcome: 'not-run';
    }
  | DeadLetterPlan;

/**
 * The one mapping from an outcome to what the broker is told. `inbox`: the inbox's options (the
 * consumer goes into the dead-letter record; `recordFailed` says whether a failure was written down).
 */
export function settlePlanOf(
  outcome: Outcome,
  inbox: Pick<ResolvedInboxOptions, 'consumer' | 'recordFailed'>,
): SettlePlan {
  const { id } = outcome;
  switch (outcome.status) {
    case 'processed':
    case 'duplicate':
      return { kind: 'ack', id, outcome: outcome.status };
    case 'conflict':
      if (outcome.action === 'ack') return { kind: 'ack', id, outcome: 'conflict' };
      return {
        kind: 'dead-letter',
        id,
        outcome: 'conflict',
        record: deadLetterRecordOf(outcome, inbox.consumer),
        recorded: false,
        source: outcome.envelope.source,
      };
    case 'failed':
      return {
        kind: 'dead-letter',
        id,
        outcome: 'failed',
        record: deadLetterRecordOf(outcome, inbox.consumer),
        // A redelivery of an id recorded failed found that row, whatever recordFailed says now.
        recorded:
          outcome.id !== undefined &&
          (outcome.reason === 'previously-failed' ||
            (inbox.recordFailed && outcome.reason !== 'invalid-id' && outcome.reason !== 'unroutable')),
        source: outcome.envelope.source,
      };
    case 'not-run':
      if (outcome.why === 'behind') return { kind: 'rerun', id, outcome: 'not-run' };
      return retry(outcome, false, undefined);
    case 'busy':
      return retry(outcome, false, undefined);
    case 'retry':
      return retry(outcome, outcome.spent, outcome.error);
  }
}

function retry(
  outcome: Outcome & { status: RetryPlan['outcome']; delayMs: number },
  spent: boolean,
  failure: SerializedError | undefined,
): RetryPlan {
  return {
    kind: 'retry',
    id: outcome.id,
    outcome: outcome.status,
    delayMs: outcome.delayMs,
    attempt: (outcome.attempt ?? outcome.envelope.attempt) + (spent ? 1 : 0),
    spent,
    failure,
  };
}
