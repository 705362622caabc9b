import type { RetryPlan, SettlePlan } from '@once/core/adapter';

/** What to do with a slice's messages, in offset order, from core's plan for each. */
export interface SlicePlan {
  /** Indexes of the contiguous prefix of settled messages; with `deadLetter` ones to send first. */
  prefix: number;
  /** Indexes within the prefix that go to the dead-letter topic. */
  deadLetter: number[];
  /** The first message to run again, if any: everything from it on is left for a later fetch. */
  retryAt: number | undefined;
  /**
   * Core's plan for the message at `retryAt`: a retry (when, and as which attempt), or a rerun (at
   * once, as the same attempt). Undefined when it has no plan (it never reached the inbox).
   */
  retry: RetryPlan | (SettlePlan & { kind: 'rerun' }) | undefined;
}

/**
 * Lays core's settle plans out over a slice: offsets may only move past a message once it is
 * processed, a duplicate, or dead-lettered, so the settled part is the contiguous prefix up to the
 * first message core says to run again (or the first without a plan). docs/pitfalls.md K4.
 */
export function planSettle(plans: readonly (SettlePlan | undefined)[], count: number): SlicePlan {
  const deadLetter: number[] = [];
  for (let k = 0; k < count; k++) {
    const plan = plans[k];
    if (!plan) return { prefix: k, deadLetter, retryAt: k, retry: undefined };
    if (plan.kind === 'retry' || plan.kind === 'rerun')
      return { prefix: k, deadLetter, retryAt: k, retry: plan };
    if (plan.kind === 'dead-letter') deadLetter.push(k);
  }
  return { prefix: count, deadLetter, retryAt: undefined, retry: undefined };
}
