import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DeadlineError, PermanentError } from '../../src/errors.js';
import {
  isEnvironmentVerdict,
  outsideMessage,
  type VerdictContext,
  verdictOf,
} from '../../src/handler/verdict.js';

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

describe('outsideMessage: a statement of once’s own outside any message', () => {
  // Written from PostgreSQL's SQLSTATE appendix, not from the classifier: what the database or
  // the network refusing looks like, against a rival's lock (55P03) and the message's own faults.
  const holds = (code: string) =>
    code.startsWith('08') ||
    code.startsWith('53') ||
    ['57P01', '57P02', '57P03', '25006', '57014', '42P01', '3F000', '40001', '40P01'].includes(code) ||
    ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND'].includes(code);
  const known = [
    '08006',
    '08001',
    '53300',
    '57P01',
    '57P03',
    '25006',
    '57014',
    '42P01',
    '3F000',
    '40001',
    '40P01',
    '55P03',
    '23505',
    '22P02',
    '54000',
    '25P02',
    '42703',
    'ECONNREFUSED',
    'EPIPE',
  ];
  const sqlstate = fc.oneof(
    fc.constantFrom(...known),
    fc.stringMatching(/^[0-9A-Z]{5}$/),
    fc
      .constantFrom('08', '53', '22', '23')
      .chain((c) => fc.stringMatching(/^[0-9A-Z]{3}$/).map((r) => c + r)),
  );

  it('is the environment’s exactly for the database, the network or the schema refusing, never a rival’s lock', () => {
    fc.assert(
      fc.property(sqlstate, (code) => {
        expect(isEnvironmentVerdict(outsideMessage(pg(code)))).toBe(holds(code));
      }),
      { numRuns: 500 },
    );
  });

  it('agrees with the engine’s claim before a handler, whatever the attempt and isolation', () => {
    fc.assert(
      fc.property(
        sqlstate,
        fc.integer({ min: 1, max: 10 }),
        fc.constantFrom('read committed' as const, 'repeatable read' as const),
        (code, attempt, isolation) => {
          // The claim's verdict under READ COMMITTED; a stricter level makes a lost race `busy`.
          const claim = verdictOf(pg(code), 'statement', at(attempt, { maxAttempts: 10, isolation }));
          const conflict = code === '40001' || code === '40P01';
          if (isolation === 'read committed' || !conflict) {
            expect(isEnvironmentVerdict(claim)).toBe(isEnvironmentVerdict(outsideMessage(pg(code))));
          } else {
            expect(claim).toEqual({ kind: 'busy' });
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('a connection dropped without a code holds; a plain error does not', () => {
    expect(isEnvironmentVerdict(outsideMessage(new Error('Connection terminated unexpectedly')))).toBe(true);
    expect(isEnvironmentVerdict(outsideMessage(new Error('boom')))).toBe(false);
    expect(isEnvironmentVerdict(outsideMessage(undefined))).toBe(false);
  });
});
