import type { Envelope, Outcome } from '@once/core';
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

describe('planSettle', () => {
  it('settles everything when nothing must be retried', () => {
    expect(planSettle([ok, dup, failed, warn, reject], 5, 'c')).toEqual({
      prefix: 5,
      deadLetter: [2, 4],
      retryAt: undefined,
      retry: undefined,
    });
  });

  it('stops at the first retry: later successes do not move the offset (K4); core says when and as which attempt', () => {
    expect(planSettle([ok, failed, retry, ok, ok], 5, 'c')).toEqual({
      prefix: 2,
      deadLetter: [1],
      retryAt: 2,
      retry: { kind: 'retry', delayMs: 5, attempt: retry.envelope.attempt + 1 },
    });
  });

  it('stops at a message that never ran', () => {
    expect(planSettle([ok, undefined, ok], 3, 'c')).toEqual({
      prefix: 1,
      deadLetter: [],
      retryAt: 1,
      retry: undefined,
    });
  });
});
