/**
 * The four failures a user must see without configuring anything (issue: a first run "lost"
 * messages silently): dead letters, conflicts, invalid ids, exhausted attempts. One warn line
 * each, with id, reason and destination, to `options.failureLogger`.
 *
 * Inside a broker adapter the adapter knows the destination (its dead-letter topic or queue), so
 * the adapter kit takes the lines over ({@link handOverFailureLines}) and core stays quiet, which
 * keeps it one line per message.
 */

import type { Logger } from '../logger.js';
import type { Outcome } from '../outcome.js';

const handedOver = new WeakSet<object>();

/** Called by the adapter kit: this inbox's failure lines are logged by the consumer. */
export function handOverFailureLines(inbox: object): void {
  handedOver.add(inbox);
}

/** Whether the inbox logs its own failure lines (no adapter took them over). */
export function logsOwnFailureLines(inbox: object): boolean {
  return !handedOver.has(inbox);
}

/**
 * Logs `o` when it is one of the four failures; used by a bare inbox (no adapter). `recorded`:
 * the inbox writes failed rows (its `recordFailed` option).
 */
export function logFailureOutcome(logger: Logger, consumer: string, o: Outcome, recorded = true): void {
  if (o.status === 'conflict') {
    logger.warn(
      { consumer, id: o.id, reason: 'conflict', destination: 'not recorded (the id is processed)' },
      'once: same message id, different payload',
    );
  } else if (o.status === 'failed' && (o.reason === 'invalid-id' || o.reason === 'max-attempts')) {
    logger.warn(
      {
        consumer,
        id: o.id,
        reason: o.reason,
        destination:
          o.reason === 'invalid-id'
            ? 'not recorded (no id)'
            : recorded
              ? 'recorded only'
              : 'not recorded (recordFailed is off)',
        error: o.error.message,
      },
      o.reason === 'invalid-id' ? 'once: message without a usable id' : 'once: attempts exhausted',
    );
  }
}
