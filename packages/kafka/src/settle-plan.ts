import { type Outcome, settleActionOf } from '@once/core';

/** What to do with a slice's outcomes, in offset order. */
export interface SettlePlan {
  /** Indexes of the contiguous prefix of settled messages; with `deadLetter` ones to send first. */
  prefix: number;
  /** Indexes within the prefix that go to the dead-letter topic. */
  deadLetter: number[];
  /** The first message to run again, if any: everything from it on is left for a later fetch. */
  retryAt: number | undefined;
}

/**
 * Plans settlement: offsets may only move past a message once it is processed, a duplicate, or
 * dead-lettered, so the plan is the contiguous prefix up to the first `retry`/`busy` (or the first
 * message that has no outcome because it never ran). PITFALLS K4.
 */
export function planSettle(outcomes: readonly (Outcome | undefined)[], count: number): SettlePlan {
  const deadLetter: number[] = [];
  for (let k = 0; k < count; k++) {
    const o = outcomes[k];
    if (!o) return { prefix: k, deadLetter, retryAt: k };
    const action = settleActionOf(o);
    if (action === 'retry') return { prefix: k, deadLetter, retryAt: k };
    if (action === 'dead-letter') deadLetter.push(k);
  }
  return { prefix: count, deadLetter, retryAt: undefined };
}
