import type { Logger } from '../logger.js';
import type { ConsumerEventMap } from './consumer.js';
import type { DeadLetterPlan } from './settle-plan.js';

/**
 * The `message:dead-lettered` event for a plan that took the message off the source: copied to
 * `deadLetter`, or dropped with dead-lettering off (`deadLetter` undefined).
 */
export function deadLetteredEvent(
  plan: DeadLetterPlan,
  deadLetter: string | undefined,
): ConsumerEventMap['message:dead-lettered'] {
  return {
    id: plan.id,
    reason: plan.record.reason,
    source: plan.source,
    deadLetter,
    recorded: plan.recorded,
    error: plan.record.error,
    attempts: plan.record.attempts,
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
 * under, a conflict's id belongs to the processed message it collided with, and with
 * `recordFailed` off nothing is written: for those this line is all that is left, and says so.
 */
export function logDropped(logger: Logger, plan: DeadLetterPlan, spec: DroppedSpec): void {
  const { id, recorded } = plan;
  const reason = plan.record.reason;
  const where = recorded
    ? 'its failed inbox row holds the body and error (once failed list)'
    : 'it is NOT recorded anywhere but this log line';
  logger.error(
    { ...spec.fields, id, reason, ...(recorded ? {} : spec.unrecorded) },
    `${spec.name}: message failed (${reason}) and dead-lettering is off; ${where}; ${spec.action}`,
  );
}
