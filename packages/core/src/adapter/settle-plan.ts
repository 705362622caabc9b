import type { Outcome } from '../outcome.js';
import { type DeadLetterRecord, deadLetterRecordOf } from './dead-letter-record.js';

/**
 * What an adapter does with a delivery once core has decided: the only thing adapters read from
 * an outcome. Core makes every decision (did it fail, does the attempt count, where does it go);
 * the adapter turns the plan into its broker's calls.
 */
export type SettlePlan =
  /** Processed, a duplicate, or a conflict under the `warn`/`ignore` policy: ack, commit, delete. */
  | { kind: 'ack' }
  /**
   * Deliver again after `delayMs`, as attempt `attempt` (raised by one only when the failure was
   * the message's own: adapters that carry the attempt in a header write this number).
   */
  | { kind: 'retry'; delayMs: number; attempt: number }
  /**
   * The handler never started because an earlier message in its batch, partition or group must
   * go first: run it again, unchanged, once that one is settled. Never spent.
   */
  | { kind: 'rerun' }
  /** Send a copy with `record` to the dead-letter destination, then ack the original. */
  | { kind: 'dead-letter'; record: DeadLetterRecord };

// The plans without fields, one frozen object each: one per message would be garbage.
const ACK: SettlePlan = Object.freeze({ kind: 'ack' });
const RERUN: SettlePlan = Object.freeze({ kind: 'rerun' });

/** The one mapping from an outcome to what the broker is told. An `ack` or `rerun` plan is shared: read it, never change it. */
export function settlePlanOf(outcome: Outcome, consumer: string): SettlePlan {
  switch (outcome.status) {
    case 'processed':
    case 'duplicate':
      return ACK;
    case 'conflict':
      return outcome.action === 'ack'
        ? ACK
        : { kind: 'dead-letter', record: deadLetterRecordOf(outcome, consumer) };
    case 'failed':
      return { kind: 'dead-letter', record: deadLetterRecordOf(outcome, consumer) };
    case 'not-run':
      if (outcome.why === 'behind') return RERUN;
      return { kind: 'retry', delayMs: outcome.delayMs, attempt: outcome.envelope.attempt };
    case 'busy':
      return { kind: 'retry', delayMs: outcome.delayMs, attempt: outcome.envelope.attempt };
    case 'retry':
      return {
        kind: 'retry',
        delayMs: outcome.delayMs,
        attempt: (outcome.attempt ?? outcome.envelope.attempt) + (outcome.spent ? 1 : 0),
      };
  }
}
