import type { Envelope, Outcome } from '@once/core';
import { settlePlanOf } from '@once/core/adapter';
import { describe, expect, it } from 'vitest';
import { planSettle } from '../../src/settle-plan.js';

const envelope = {
  body: Buffer.alloc(0),
  headers: {},
  source: { broker: 'kafka', queue: 't', partition: 0, offset: '5' },
  attempt: 1,
  redelivered: false,
} as Envelope;
const ok: Outcome = { status: 'processed', id: 'a', envelope, result: undefined };
const dup: Outcome = { status: 'duplicate', id: 'a', envelope, result: undefined };
const failed: Outcome = {
  status: 'failed',
  id: 'a',
  envelope,
  reason: 'permanent',
  error: { name: 'E', message: 'm' },
};
const retry: Outcome = {
  status: 'retry',
  id: 'a',
  envelope,
  error: { name: 'E', message: 'm' },
  delayMs: 5,
  spent: true,
};
const warn: Outcome = { status: 'conflict', id: 'a', envelope, action: 'ack' };
const reject: Outcome = { status: 'conflict', id: 'a', envelope, action: 'dead-letter' };

const behind: Outcome = {
  status: 'not-run',
  id: 'a',
  envelope,
  why: 'behind',
  error: { name: 'E', message: 'm' },
  delayMs: 0,
};
/** Core's plan for each outcome, as the runner has them (undefined: no outcome). */
const plans = (outcomes: (Outcome | undefined)[]) =>
  outcomes.map((o) => (o ? settlePlanOf(o, { consumer: 'c', recordFailed: true }) : undefined));

describe('planSettle', () => {
  it('settles everything when nothing must be retried', () => {
    expect(planSettle(plans([ok, dup, failed, warn, reject]), 5)).toEqual({
      prefix: 5,
      deadLetter: [2, 4],
      retryAt: undefined,
      retry: undefined,
    });
  });

  it('stops at the first retry: later successes do not move the offset (K4); core says when and as which attempt', () => {
    expect(planSettle(plans([ok, failed, retry, ok, ok]), 5)).toEqual({
      prefix: 2,
      deadLetter: [1],
      retryAt: 2,
      retry: {
        kind: 'retry',
        id: 'a',
        outcome: 'retry',
        delayMs: 5,
        attempt: retry.envelope.attempt + 1,
        spent: true,
        failure: { name: 'E', message: 'm' },
      },
    });
  });

  it('stops at a message a neighbour before it kept from running: core says rerun it', () => {
    expect(planSettle(plans([ok, behind, ok]), 3)).toEqual({
      prefix: 1,
      deadLetter: [],
      retryAt: 1,
      retry: { kind: 'rerun', id: 'a', outcome: 'not-run' },
    });
  });

  it('stops at a message that never ran', () => {
    expect(planSettle(plans([ok, undefined, ok]), 3)).toEqual({
      prefix: 1,
      deadLetter: [],
      retryAt: 1,
      retry: undefined,
    });
  });
});
