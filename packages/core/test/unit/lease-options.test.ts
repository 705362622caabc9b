import { describe, expect, it } from 'vitest';
import { callerTransactionsOf, leaseOf, resolveInboxOptions } from '../../src/engine/options.js';
import { createInbox, type InboxOptions, OnceError, type PgPoolLike } from '../../src/index.js';
import { namingFactory } from '../../src/option-check.js';

const pool = {
  connect: async () => ({}) as never,
  query: async () => ({ rows: [], rowCount: 0 }),
} as PgPoolLike;
const base = { pool, consumer: 'c', handler: () => undefined };
const transactions = { run: async () => undefined as never, query: async () => ({ rows: [], rowCount: 0 }) };

function errorOf(fn: () => unknown): OnceError {
  try {
    fn();
  } catch (err) {
    if (OnceError.is(err)) return err;
    throw err;
  }
  throw new Error('did not throw');
}

describe('the mode option', () => {
  it('defaults to transaction mode, with no lease and no caller transactions', () => {
    const o = resolveInboxOptions(base);
    expect(o.mode).toBe('transaction');
    expect(leaseOf(o)).toBeUndefined();
    expect(callerTransactionsOf(o)).toBeUndefined();
  });

  it("'lease' is a 30 s lease renewed every 10 s", () => {
    const lease = leaseOf(resolveInboxOptions({ ...base, mode: 'lease' }));
    expect(lease?.leaseMs).toBe(30_000);
    expect(lease?.heartbeatMs).toBe(10_000);
    expect(lease?.workerId).toMatch(/:\d+$/);
  });

  it('derives the heartbeat from the lease', () => {
    const o = resolveInboxOptions({ ...base, mode: { lease: { leaseMs: 900 } } });
    expect(leaseOf(o)?.heartbeatMs).toBe(300);
  });

  it('{ transactions } is caller-transaction mode, without a lease', () => {
    const o = resolveInboxOptions({ ...base, mode: { transactions } });
    expect(callerTransactionsOf(o)).toBe(transactions);
    expect(leaseOf(o)).toBeUndefined();
  });

  it('resolved options are options createInbox takes again', () => {
    for (const mode of ['lease', { lease: { leaseMs: 900 } }, { transactions }] as const) {
      const o = resolveInboxOptions({ ...base, mode });
      expect(resolveInboxOptions({ ...o }).mode).toEqual(o.mode);
    }
  });

  it.each([
    [{ mode: 'leased' }, 'mode'],
    [{ mode: { lease: { leaseMs: 100 }, transactions } }, 'mode'],
    [{ mode: {} }, 'mode'],
    [{ mode: { lease: 5 } }, 'mode.lease'],
    [{ mode: { transactions: {} } }, 'mode.transactions'],
    [{ mode: { lease: { leaseMs: -1 } } }, 'mode.lease.leaseMs'],
    [{ mode: { lease: { leaseMs: 0 } } }, 'mode.lease.leaseMs'],
    [{ mode: { lease: { leaseMs: 1.5 } } }, 'mode.lease.leaseMs'],
    [{ mode: { lease: { leaseMs: Number.NaN } } }, 'mode.lease.leaseMs'],
    [{ mode: { lease: { leaseMs: '1000' } } }, 'mode.lease.leaseMs'],
    [{ mode: { lease: { heartbeatMs: -5 } } }, 'mode.lease.heartbeatMs'],
    [{ mode: { lease: { heartbeatMs: 0 } } }, 'mode.lease.heartbeatMs'],
    [{ mode: { lease: { workerId: '' } } }, 'mode.lease.workerId'],
    [{ mode: { lease: { workerId: 'x'.repeat(101) } } }, 'mode.lease.workerId'],
  ])('rejects %j naming option %s', (patch, field) => {
    const err = errorOf(() => createInbox({ ...base, ...(patch as object) }));
    expect(err.code).toBe('INVALID_OPTION');
    expect(err.message.startsWith(`createInbox: option '${field}' `)).toBe(true);
  });

  it.each([
    ['leaseMs', 'mode: { lease: { leaseMs } }'],
    ['heartbeatMs', 'mode: { lease: { heartbeatMs } }'],
    ['workerId', 'mode: { lease: { workerId } }'],
    ['transactions', 'mode: { transactions }'],
  ])('refuses the old option %s, naming its new spelling', (old, now) => {
    const value = old === 'transactions' ? transactions : old === 'workerId' ? 'w' : 1000;
    const err = errorOf(() => createInbox({ ...base, mode: 'lease', [old]: value } as InboxOptions));
    expect(err.code).toBe('INVALID_OPTION');
    expect(err.message).toBe(`createInbox: option '${old}' is no longer an option of its own: write ${now}`);
  });

  it('rejects a lease shorter than (or barely longer than) the heartbeat interval', () => {
    for (const [leaseMs, heartbeatMs] of [
      [1000, 2000],
      [1000, 1000],
      [1000, 501],
    ] as const) {
      const err = errorOf(() => createInbox({ ...base, mode: { lease: { leaseMs, heartbeatMs } } }));
      expect(err.code).toBe('INVALID_OPTION');
      expect(err.message).toMatch(
        /^createInbox: option 'mode\.lease\.heartbeatMs' .*at most half of leaseMs/,
      );
    }
    const o = resolveInboxOptions({ ...base, mode: { lease: { leaseMs: 1000, heartbeatMs: 500 } } });
    expect(leaseOf(o)?.heartbeatMs).toBe(500);
  });

  it('cannot be written with a lease and the caller transactions together (compile-time)', () => {
    const both = () =>
      // @ts-expect-error: one mode at a time
      resolveInboxOptions({ ...base, mode: { lease: {}, transactions } });
    expect(errorOf(both).code).toBe('INVALID_OPTION');
    const old = () =>
      // @ts-expect-error: leaseMs is a lease setting now
      resolveInboxOptions({ ...base, mode: 'lease', leaseMs: 1000 });
    expect(errorOf(old).code).toBe('INVALID_OPTION');
  });
});

describe('namingFactory', () => {
  it("puts the factory in front once, and an adapter's factory replaces createInbox's name", () => {
    const inner = errorOf(() => createInbox({ ...base, maxAttempts: 0 }));
    expect(inner.message).toBe("createInbox: option 'maxAttempts' must be at least 1, got 0");
    const outer = errorOf(() =>
      namingFactory('createTestConsumer', () => createInbox({ ...base, maxAttempts: 0 })),
    );
    expect(outer.code).toBe('INVALID_OPTION');
    expect(outer.message).toBe("createTestConsumer: option 'maxAttempts' must be at least 1, got 0");
    const named = errorOf(() =>
      namingFactory('createOuter', () =>
        namingFactory('createTestConsumer', () => resolveInboxOptions({ ...base, maxAttempts: 0 })),
      ),
    );
    expect(named.message).toBe("createTestConsumer: option 'maxAttempts' must be at least 1, got 0");
    const other = new OnceError('DATABASE', 'boom');
    expect(
      errorOf(() =>
        namingFactory('createX', () => {
          throw other;
        }),
      ),
    ).toBe(other);
  });
});
