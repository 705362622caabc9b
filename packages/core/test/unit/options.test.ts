import { describe, expect, it } from 'vitest';
import { quoteIdentifier } from '../../src/admin/index.js';
import { resolveInboxOptions } from '../../src/engine/options.js';
import { OnceError, type PgPoolLike } from '../../src/index.js';

const pool = {
  connect: async () => ({}) as never,
  query: async () => ({ rows: [], rowCount: 0 }),
} as PgPoolLike;
const base = { pool, consumer: 'c', handler: () => undefined };

function errorOf(fn: () => unknown): OnceError {
  try {
    fn();
  } catch (err) {
    if (OnceError.is(err)) return err;
    throw err;
  }
  throw new Error('did not throw');
}

describe('resolveInboxOptions', () => {
  it('applies defaults and freezes', () => {
    const o = resolveInboxOptions(base);
    expect(o.schema).toBe('once');
    expect(o.quotedSchema).toBe('"once"');
    expect(o.maxAttempts).toBe(5);
    expect(o.retryDelayMs(1)).toBe(1000);
    expect(o.retryDelayMs(20)).toBe(60_000);
    expect(Object.isFrozen(o)).toBe(true);
  });
  it.each([
    ['maxAttempts', { maxAttempts: 0 }, /option 'maxAttempts' must be at least 1/],
    ['lockTimeoutMs', { lockTimeoutMs: -5 }, /option 'lockTimeoutMs' must be at least 1/],
    ['handlerTimeoutMs', { handlerTimeoutMs: '10s' }, /option 'handlerTimeoutMs' must be a finite integer/],
    ['retentionMs', { retentionMs: Number.NaN }, /option 'retentionMs' must be a finite integer/],
    [
      'conflictPolicy',
      { conflictPolicy: 'drop' },
      /option 'conflictPolicy' must be one of 'reject', 'warn', 'ignore'/,
    ],
    ['consumer', { consumer: '' }, /option 'consumer' must be a non-empty string/],
    ['handler', { handler: 5 }, /option 'handler' must be a function/],
    ['pool', { pool: {} }, /option 'pool' must be a pg Pool/],
    ['storeResult', { storeResult: 'yes' }, /option 'storeResult' must be a boolean/],
  ])('names the bad field: %s', (_field, patch, message) => {
    const err = errorOf(() => resolveInboxOptions({ ...base, ...(patch as object) } as never));
    expect(err.code).toBe('INVALID_OPTION');
    expect(err.message).toMatch(message);
  });
  it('rejects a schema name carrying SQL', () => {
    const err = errorOf(() => resolveInboxOptions({ ...base, schema: 'once; DROP TABLE users' }));
    expect(err.code).toBe('INVALID_IDENTIFIER');
    expect(err.message).toMatch(/option 'schema'/);
  });
});

describe('quoteIdentifier', () => {
  it('quotes valid names', () => expect(quoteIdentifier('my_once2')).toBe('"my_once2"'));
  it.each(['Once', 'a"b', '1abc', 'x'.repeat(64), ''])('refuses %j', (name) => {
    expect(() => quoteIdentifier(name)).toThrow(/lower-case SQL identifier/);
  });
});
