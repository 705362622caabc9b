import { describe, expect, it } from 'vitest';
import { type SettlePlan, settlePlanOf } from '../../src/adapter/index.js';
import type { Outcome } from '../../src/index.js';

// The one mapping from an outcome to what the broker is told (issue #28 item 3): what adapters
// need is on the plan (the record, recorded or not, spent or not, the settled event's fields).

const envelope = {
  body: Buffer.alloc(0),
  headers: {},
  source: { broker: 't', queue: 'q', partition: 2, offset: '7' },
  attempt: 3,
  redelivered: true,
};
const err = { name: 'E', message: 'm', code: 'X1' };
const on = { consumer: 'c', recordFailed: true };
const off = { consumer: 'c', recordFailed: false };

describe('settlePlanOf', () => {
  it.each<[string, Outcome, Partial<SettlePlan>]>([
    [
      'processed',
      { status: 'processed', id: 'a', envelope, result: 1 },
      { kind: 'ack', id: 'a', outcome: 'processed' },
    ],
    [
      'duplicate',
      { status: 'duplicate', id: 'a', envelope, result: 1 },
      { kind: 'ack', id: 'a', outcome: 'duplicate' },
    ],
    [
      'conflict (ack)',
      { status: 'conflict', id: 'a', envelope, action: 'ack' },
      { kind: 'ack', id: 'a', outcome: 'conflict' },
    ],
    [
      'retry, spent',
      { status: 'retry', id: 'a', envelope, error: err, delayMs: 5, spent: true },
      { kind: 'retry', id: 'a', outcome: 'retry', delayMs: 5, attempt: 4, spent: true, failure: err },
    ],
    [
      'retry, not spent',
      { status: 'retry', id: 'a', envelope, error: err, delayMs: 5, spent: false },
      { kind: 'retry', id: 'a', outcome: 'retry', delayMs: 5, attempt: 3, spent: false, failure: err },
    ],
    [
      'not-run, unavailable',
      { status: 'not-run', id: 'a', envelope, why: 'unavailable', error: err, delayMs: 9 },
      {
        kind: 'retry',
        id: 'a',
        outcome: 'not-run',
        delayMs: 9,
        attempt: 3,
        spent: false,
        failure: undefined,
      },
    ],
    [
      'busy',
      { status: 'busy', id: 'a', envelope, delayMs: 6 },
      { kind: 'retry', id: 'a', outcome: 'busy', delayMs: 6, attempt: 3, spent: false, failure: undefined },
    ],
    [
      'not-run, behind',
      { status: 'not-run', id: 'a', envelope, why: 'behind', error: err, delayMs: 0 },
      { kind: 'rerun', id: 'a', outcome: 'not-run' },
    ],
  ])('%s', (_, outcome, plan) => {
    expect(settlePlanOf(outcome, on)).toEqual(plan);
  });

  it('a failure dead-letters with its record, recorded only when a failed row was written', () => {
    const failed = (reason: 'permanent' | 'max-attempts' | 'invalid-id' | 'previously-failed', id?: string) =>
      ({ status: 'failed', id, envelope, reason, error: err }) as const;
    const plan = settlePlanOf(failed('permanent', 'a'), on);
    expect(plan).toEqual({
      kind: 'dead-letter',
      id: 'a',
      outcome: 'failed',
      recorded: true,
      source: envelope.source,
      record: {
        reason: 'permanent',
        error: err,
        attempts: 3,
        consumer: 'c',
        id: 'a',
        origin: { broker: 't', queue: 'q', partition: 2, offset: '7' },
        at: expect.any(String),
      },
    });
    const recorded = (o: Outcome, ctx: typeof on) => {
      const p = settlePlanOf(o, ctx);
      return p.kind === 'dead-letter' ? p.recorded : p.kind;
    };
    expect(recorded(failed('max-attempts', 'a'), on)).toBe(true);
    expect(recorded(failed('previously-failed', 'a'), on)).toBe(true);
    // With recordFailed off nothing is written, but a row written before is still there.
    expect(recorded(failed('permanent', 'a'), off)).toBe(false);
    expect(recorded(failed('max-attempts', 'a'), off)).toBe(false);
    expect(recorded(failed('previously-failed', 'a'), off)).toBe(true);
    // No id, no row.
    expect(recorded(failed('invalid-id'), on)).toBe(false);
  });

  it('a conflict under reject dead-letters, never recorded (its id is the processed message)', () => {
    const plan = settlePlanOf({ status: 'conflict', id: 'a', envelope, action: 'dead-letter' }, on);
    expect(plan).toMatchObject({
      kind: 'dead-letter',
      outcome: 'conflict',
      id: 'a',
      recorded: false,
      record: { reason: 'conflict', error: { name: 'ConflictError' }, consumer: 'c' },
    });
  });
});
