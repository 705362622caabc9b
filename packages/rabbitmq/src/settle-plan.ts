import type { Outcome } from '@once/core';
import { settlePlanOf as corePlanOf, type DeadLetterRecord } from '@once/core/adapter';
import { tierFor } from './topology.js';

/** What the consumer does with a delivery once core's plan is known, in RabbitMQ's terms. */
export type RabbitSettlePlan =
  | { kind: 'ack' }
  /** Republish to the retry queue of `tierMs` with `attempt` in our header, then ack. */
  | { kind: 'retry'; tierMs: number; attempt: number }
  /** Run again from our prefetch window, at once: an earlier message stopped it. */
  | { kind: 'rerun' }
  /** Publish to the dead-letter exchange with the record in a header, then ack. */
  | { kind: 'dead-letter'; record: DeadLetterRecord };

/** Core's settle plan, with a retry delay rounded up to one of the retry tiers. */
export function settlePlanOf(
  outcome: Outcome,
  consumer: string,
  tiersMs: readonly number[],
): RabbitSettlePlan {
  const plan = corePlanOf(outcome, consumer);
  if (plan.kind !== 'retry') return plan;
  return { kind: 'retry', tierMs: tierFor(plan.delayMs, tiersMs), attempt: plan.attempt };
}
