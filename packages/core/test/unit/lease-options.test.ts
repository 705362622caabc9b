import { describe, expect, it } from 'vitest';
import { OnceError, type PgPoolLike } from '../../src/index.js';
import { resolveInboxOptions } from '../../src/options.js';

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

describe('lease options', () => {
  it('default to transactional mode with a 30 s lease renewed every 10 s', () => {
    const o = resolveInboxOptions(base);
    expect(o.mode).toBe('transaction');
    expect(o.leaseMs).toBe(30_000);
    expect(o.heartbeatMs).toBe(10_000);
    expect(o.workerId).toMatch(/:\d+$/);
  });

  it('derive the heartbeat from the lease', () => {
    const o = resolveInboxOptions({ ...base, mode: 'lease', leaseMs: 900 });
    expect(o.heartbeatMs).toBe(300);
  });

  it.each([
    [{ mode: 'leased' }, 'mode'],
    [{ leaseMs: -1 }, 'leaseMs'],
    [{ leaseMs: 0 }, 'leaseMs'],
    [{ leaseMs: 1.5 }, 'leaseMs'],
    [{ leaseMs: Number.NaN }, 'leaseMs'],
    [{ leaseMs: '1000' }, 'leaseMs'],
    [{ heartbeatMs: -5 }, 'heartbeatMs'],
    [{ heartbeatMs: 0 }, 'heartbeatMs'],
    [{ workerId: '' }, 'workerId'],
    [{ workerId: 'x'.repeat(101) }, 'workerId'],
  ])('reject %j naming options.%s', (patch, field) => {
    const err = errorOf(() => resolveInboxOptions({ ...base, mode: 'lease', ...(patch as object) }));
    expect(err.code).toBe('INVALID_OPTION');
    expect(err.message).toMatch(new RegExp(`^options\\.${field} `));
  });

  it('reject a lease shorter than (or barely longer than) the heartbeat interval', () => {
    for (const [leaseMs, heartbeatMs] of [
      [1000, 2000],
      [1000, 1000],
      [1000, 501],
    ] as const) {
      const err = errorOf(() => resolveInboxOptions({ ...base, mode: 'lease', leaseMs, heartbeatMs }));
      expect(err.code).toBe('INVALID_OPTION');
      expect(err.message).toMatch(/^options\.heartbeatMs .*at most half of options\.leaseMs/);
    }
    expect(resolveInboxOptions({ ...base, mode: 'lease', leaseMs: 1000, heartbeatMs: 500 }).heartbeatMs).toBe(
      500,
    );
  });
});
