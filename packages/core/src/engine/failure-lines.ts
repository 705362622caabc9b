/**
 * The four failures a user must see without configuring anything (issue: a first run "lost"
 * messages silently): dead letters, conflicts, invalid ids, exhausted attempts. One warn line
 * each, with id, reason and destination, to `options.failureLogger`.
 *
 * Who logs them is decided where the inbox is made ({@link FailureLineOwner}): a bare inbox logs
 * its own; inside a broker adapter the adapter knows the destination (its dead-letter topic or
 * queue), so the consumer logs them and the engine stays quiet, which keeps it one line per message.
 */

import type { Logger } from '../logger.js';
import type { Outcome } from '../message/outcome.js';

/**
 * Who logs an inbox's failure lines: `engine` (the inbox itself: a bare inbox, `@once/http`), or
 * `adapter` (the broker consumer that made the inbox, which logs them when it settles).
 */
export type FailureLineOwner = 'engine' | 'adapter';

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
  } else if (o.status === 'failed' && o.reason === 'unroutable') {
    logger.warn(
      {
        consumer,
        id: o.id,
        reason: o.reason,
        destination: 'not recorded (no database)',
        error: o.error.message,
      },
      'once: message the router could not place in a database',
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
