import type { Outcome } from '@once/core';
import { type SettlePlan, settlePlanOf } from '@once/core/adapter';

/** What to do with a slice's outcomes, in offset order. */
export interface SlicePlan {
  /** Indexes of the contiguous prefix of settled messages; with `deadLetter` ones to send first. */
  prefix: number;
  /** Indexes within the prefix that go to the dead-letter topic. */
  deadLetter: number[];
  /** The first message to run again, if any: everything from it on is left for a later fetch. */
  retryAt: number | undefined;
  /**
   * Core's plan for the message at `retryAt`: when to run it again and as which attempt.
   * Undefined when it has no outcome (it never reached the inbox).
   */
  retry: (SettlePlan & { kind: 'retry' }) | undefined;
}

/**
 * Plans settlement from core's settle plans: offsets may only move past a message once it is
 * processed, a duplicate, or dead-lettered, so the plan is the contiguous prefix up to the first
 * message core says to run again (or the first that has no outcome). docs/pitfalls.md K4.
 */
export function planSettle(
  outcomes: readonly (Outcome | undefined)[],
  count: number,
  consumer: string,
): SlicePlan {
  const deadLetter: number[] = [];
  for (let k = 0; k < count; k++) {
    const o = outcomes[k];
    if (!o) return { prefix: k, deadLetter, retryAt: k, retry: undefined };
    const plan = settlePlanOf(o, consumer);
    if (plan.kind === 'retry') return { prefix: k, deadLetter, retryAt: k, retry: plan };
    // A neighbour that never ran is first only when nothing before it stopped: run it at once.
    if (plan.kind === 'rerun') {
      return {
        prefix: k,
        deadLetter,
        retryAt: k,
        retry: { kind: 'retry', delayMs: 0, attempt: o.envelope.attempt },
      };
    }
    if (plan.kind === 'dead-letter') deadLetter.push(k);
  }
  return { prefix: count, deadLetter, retryAt: undefined, retry: undefined };
}
