import { type FailReason, type Outcome, type SerializedError, settleActionOf } from '@once/core';
import { tierFor } from './topology.js';

/** What the consumer does with a delivery once its outcome is known. */
export type SettlePlan =
  | { kind: 'ack' }
  /** Republish to the retry queue of `tierMs` with `attempt` in our header, then ack. */
  | { kind: 'retry'; tierMs: number; attempt: number }
  /** Publish to the dead-letter exchange with the error in headers, then ack. */
  | { kind: 'dead-letter'; reason: FailReason | 'conflict'; error: SerializedError };

/** The one mapping from a core outcome to the broker's actions. */
export function settlePlanOf(outcome: Outcome, tiersMs: readonly number[]): SettlePlan {
  const action = settleActionOf(outcome);
  if (action === 'ack') return { kind: 'ack' };
  if (action === 'retry') {
    const delayMs = outcome.status === 'retry' || outcome.status === 'busy' ? outcome.delayMs : 0;
    // Only the handler's own failure spends an attempt: not a neighbour that never ran, not a
    // database fault, not a wait bound (core says which in `spent`).
    const spent = outcome.status === 'retry' && outcome.spent ? 1 : 0;
    return { kind: 'retry', tierMs: tierFor(delayMs, tiersMs), attempt: outcome.envelope.attempt + spent };
  }
  if (outcome.status === 'failed')
    return { kind: 'dead-letter', reason: outcome.reason, error: outcome.error };
  return {
    kind: 'dead-letter',
    reason: 'conflict',
    error: {
      name: 'ConflictError',
      message: 'same message id as a processed message, different payload fingerprint',
    },
  };
}
