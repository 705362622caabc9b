import { describe, expect, it } from 'vitest';
import { DeadlineError, PermanentError } from '../../src/errors.js';
import { type VerdictContext, verdictOf } from '../../src/handler/verdict.js';

const pg = (code: string) => Object.assign(new Error(`sqlstate ${code}`), { code });
const at = (attempt: number, over: Partial<VerdictContext> = {}): VerdictContext => ({
  attempt,
  maxAttempts: 3,
  classify: () => 'transient',
  isolation: 'read committed',
  ...over,
});

describe('verdictOf: the one decision on a failed message', () => {
  it('never spends or ends a message for faults of the environment, at any attempt', () => {
    for (const code of [
      '08006',
      '57P01',
      '57P02',
      '57P03',
      '53300',
      '53200',
      '25006',
      '40001',
      '40P01',
      '55P03',
      '57014',
    ]) {
      for (const where of ['handler', 'statement'] as const) {
        const v = verdictOf(pg(code), where, at(99));
        expect(v.kind === 'fail' || (v.kind === 'retry' && v.spent), `${code} from ${where}`).toBe(false);
      }
    }
    expect(verdictOf(new Error('Connection terminated unexpectedly'), 'statement', at(99))).toEqual({
      kind: 'retry',
      spent: false,
    });
  });

  it("counts the message's own data and integrity errors, also from once's statements (COMMIT)", () => {
    for (const code of ['22P05', '22021', '23505', '23503', '54000', '25P02']) {
      expect(verdictOf(pg(code), 'statement', at(1))).toEqual({ kind: 'retry', spent: true });
      expect(verdictOf(pg(code), 'statement', at(3))).toEqual({ kind: 'fail', reason: 'max-attempts' });
    }
  });

  it('ends unknown errors of our statements at maxAttempts: nothing retries forever', () => {
    expect(verdictOf(pg('XX000'), 'statement', at(2))).toEqual({ kind: 'retry', spent: true });
    expect(verdictOf(pg('XX000'), 'statement', at(3))).toEqual({ kind: 'fail', reason: 'max-attempts' });
  });

  it('permanent errors and the user classifier end the message at once', () => {
    expect(verdictOf(new PermanentError('bad'), 'handler', at(1))).toEqual({
      kind: 'fail',
      reason: 'permanent',
    });
    expect(verdictOf(new Error('x'), 'handler', at(1, { classify: () => 'permanent' }))).toEqual({
      kind: 'fail',
      reason: 'permanent',
    });
  });

  it('a missing once schema is a setup fault from our statements, but the handler’s own bug', () => {
    expect(verdictOf(pg('42P01'), 'statement', at(5))).toEqual({ kind: 'unavailable' });
    expect(verdictOf(pg('42P01'), 'handler', at(3))).toEqual({ kind: 'fail', reason: 'max-attempts' });
  });

  it('our claim waiting past lock_timeout, or losing a race under a stricter isolation, is busy', () => {
    expect(verdictOf(pg('55P03'), 'statement', at(1))).toEqual({ kind: 'busy' });
    expect(verdictOf(pg('40001'), 'statement', at(1, { isolation: 'serializable' }))).toEqual({
      kind: 'busy',
    });
    expect(verdictOf(pg('40001'), 'statement', at(1))).toEqual({ kind: 'retry', spent: false });
  });

  it('a handler past its deadline spends the attempt and ends at maxAttempts', () => {
    expect(verdictOf(new DeadlineError(10), 'handler', at(1))).toEqual({ kind: 'retry', spent: true });
    expect(verdictOf(new DeadlineError(10), 'handler', at(3))).toEqual({
      kind: 'fail',
      reason: 'max-attempts',
    });
  });
});
