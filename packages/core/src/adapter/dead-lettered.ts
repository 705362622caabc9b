import type { Logger } from '../logger.js';
import type { ConsumerEventMap } from './consumer.js';
import { type DeadLetterOutcome, isRecordedFailed } from './dead-letter-record.js';

/**
 * The `message:dead-lettered` event for an outcome that left the source: copied to
 * `deadLetter`, or dropped with dead-lettering off (`deadLetter` undefined).
 */
export function deadLetteredEvent(
  outcome: DeadLetterOutcome,
  deadLetter: string | undefined,
): ConsumerEventMap['message:dead-lettered'] {
  return {
    id: outcome.id,
    reason: outcome.status === 'conflict' ? 'conflict' : outcome.reason,
    source: outcome.envelope.source,
    deadLetter,
    recorded: isRecordedFailed(outcome),
  };
}

/** Where a message dropped with dead-lettering off is to be found, and how to log it. */
export interface DroppedSpec {
  /** Prefix of the log line: `once/kafka`. */
  name: string;
  /** What the adapter did with the original: `skipped` (its offset passed), `deleted`. */
  action: string;
  /** Where it was on the broker: topic and offset, a message id. */
  fields: Record<string, unknown>;
  /**
   * More of the message for the line when nothing else keeps it (an invalid id, a conflict):
   * its key, its header names.
   */
  unrecorded?: Record<string, unknown>;
}

/**
 * Logs, at error level, a failed message dropped because dead-lettering is off. A `failed` inbox
 * row holds the body and error of most (`once failed list`); an invalid id has no key to record
 * under and a conflict's id belongs to the processed message it collided with, so for those this
 * line is all that is left, and says so.
 */
export function logDropped(logger: Logger, outcome: DeadLetterOutcome, spec: DroppedSpec): void {
  const { reason, id } = deadLetteredEvent(outcome, undefined);
  const recorded = isRecordedFailed(outcome);
  const where = recorded
    ? 'its failed inbox row holds the body and error (once failed list)'
    : 'it is NOT recorded anywhere but this log line';
  logger.error(
    { ...spec.fields, id, reason, ...(recorded ? {} : spec.unrecorded) },
    `${spec.name}: message failed (${reason}) and dead-lettering is off; ${where}; ${spec.action}`,
  );
}
