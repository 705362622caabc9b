import { afterEach, describe, expect, it, vi } from 'vitest';
import { resolveInboxOptions } from '../../src/engine/options.js';
import { verdictOf } from '../../src/handler/verdict.js';
import {
  BoundedClient,
  boundPool,
  ConnectTimeoutError,
  DEFAULT_POOL_BOUNDS,
  isBounded,
  keepAlive,
  rawClient,
  rawPool,
  StatementTimeoutError,
  statementKind,
  warnPoolSettings,
} from '../../src/pg/bounded-pool.js';
import type { PgClientLike, PgPoolLike } from '../../src/pg/pg-like.js';
import { classifyDbError } from '../../src/pg/sqlstate.js';

/** A fake pg client: `query` answers only when the test says so; its socket records destroy(). */
function fakeClient() {
  const pending: { resolve(v: unknown): void; reject(e: unknown): void; text: string }[] = [];
  const released: (Error | boolean | undefined)[] = [];
  const socket = { destroyed: false, keepAlive: undefined as undefined | [boolean, number] };
  const client = {
    query(text: string) {
      return new Promise((resolve, reject) => pending.push({ resolve, reject, text }));
    },
    release(err?: Error | boolean) {
      released.push(err);
    },
    on: vi.fn(),
    off: vi.fn(),
    connection: {
      stream: {
        destroy() {
          socket.destroyed = true;
          // pg errors the query in flight when its socket goes.
          for (const p of pending.splice(0)) p.reject(new Error('Connection terminated unexpectedly'));
        },
        setKeepAlive(on: boolean, ms: number) {
          socket.keepAlive = [on, ms];
        },
      },
    },
  };
  return { client: client as unknown as PgClientLike, pending, released, socket };
}

function fakePool(connect: () => Promise<PgClientLike>): PgPoolLike {
  return {
    connect,
    query: () => Promise.reject(new Error('pool.query of the raw pool must not be used')),
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('bounded pool', () => {
  it('a statement past the bound fails with STATEMENT_TIMEOUT, destroys the socket and releases with the error', async () => {
    vi.useFakeTimers();
    const f = fakeClient();
    const pool = boundPool(
      fakePool(async () => f.client),
      { statementTimeoutMs: 100, connectTimeoutMs: 50 },
    );
    const client = await pool.connect();
    const q = client.query('COMMIT');
    const caught = q.catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(99);
    expect(f.socket.destroyed).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const err = await caught;
    expect(err).toBeInstanceOf(StatementTimeoutError);
    expect(err).toMatchObject({
      code: 'STATEMENT_TIMEOUT',
      statement: 'COMMIT',
      boundMs: 100,
      retryable: true,
    });
    expect(f.socket.destroyed).toBe(true);
    // Every later statement fails at once; the release destroys the connection in the pool.
    await expect(client.query('ROLLBACK')).rejects.toBe(err);
    client.release();
    expect(f.released).toEqual([err]);
  });

  it('a reply in time clears the timer and releases normally', async () => {
    vi.useFakeTimers();
    const f = fakeClient();
    const client = await boundPool(
      fakePool(async () => f.client),
      {
        statementTimeoutMs: 100,
        connectTimeoutMs: 50,
      },
    ).connect();
    const q = client.query('SELECT 1');
    f.pending[0]!.resolve({ rows: [{ x: 1 }], rowCount: 1 });
    await expect(q).resolves.toMatchObject({ rowCount: 1 });
    await vi.advanceTimersByTimeAsync(1000);
    expect(f.socket.destroyed).toBe(false);
    client.release();
    expect(f.released).toEqual([undefined]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a connect past the bound fails with CONNECT_TIMEOUT; the late client goes back to the pool', async () => {
    vi.useFakeTimers();
    const f = fakeClient();
    let arrive!: (c: PgClientLike) => void;
    const pool = boundPool(
      fakePool(() => new Promise((resolve) => (arrive = resolve))),
      { statementTimeoutMs: 100, connectTimeoutMs: 50 },
    );
    const got = pool.connect().catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(50);
    expect(await got).toMatchObject({ code: 'CONNECT_TIMEOUT', boundMs: 50 });
    expect(await got).toBeInstanceOf(ConnectTimeoutError);
    arrive(f.client);
    await vi.advanceTimersByTimeAsync(0);
    expect(f.released).toEqual([undefined]);
  });

  it('pool.query runs on a bounded client and releases it with the error, as pg.Pool does', async () => {
    vi.useFakeTimers();
    const f = fakeClient();
    const pool = boundPool(
      fakePool(async () => f.client),
      { statementTimeoutMs: 100, connectTimeoutMs: 50 },
    );
    const q = pool.query('SELECT claim').catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(100);
    const err = await q;
    expect(err).toMatchObject({ code: 'STATEMENT_TIMEOUT', statement: 'SELECT' });
    expect(f.socket.destroyed).toBe(true);
    expect(f.released).toEqual([err]);
  });

  it('is applied once: re-binding a bounded pool wraps its raw pool, never the wrapper', () => {
    const raw = fakePool(async () => fakeClient().client);
    const a = boundPool(raw, DEFAULT_POOL_BOUNDS);
    expect(boundPool(a, DEFAULT_POOL_BOUNDS)).toBe(a);
    const b = boundPool(a, { statementTimeoutMs: 5, connectTimeoutMs: 5 });
    expect(rawPool(b)).toBe(raw);
    expect(isBounded(b) && b.bounds.statementTimeoutMs).toBe(5);
    expect(rawPool(raw)).toBe(raw);
  });

  it("the handler's ctx.tx sees the raw client (its deadline bounds it); keepAlive reaches the socket", () => {
    const f = fakeClient();
    const bc = new BoundedClient(f.client, 10);
    expect(rawClient(bc)).toBe(f.client);
    expect(keepAlive(bc, 1234)).toBe(true);
    expect(f.socket.keepAlive).toEqual([true, 1234]);
  });

  it("the inbox's options carry the bounds, with the documented defaults, and bound the pool", () => {
    const raw = fakePool(async () => fakeClient().client);
    const o = resolveInboxOptions({ pool: raw, consumer: 'c', handler: async () => {} });
    expect(o.statementTimeoutMs).toBe(30_000);
    expect(o.connectTimeoutMs).toBe(10_000);
    expect(isBounded(o.pool) && o.pool.bounds).toEqual({
      statementTimeoutMs: 30_000,
      connectTimeoutMs: 10_000,
    });
    expect(rawPool(o.pool)).toBe(raw);
    const again = resolveInboxOptions({ ...o, statementTimeoutMs: 500 });
    expect(rawPool(again.pool)).toBe(raw);
    expect(() =>
      resolveInboxOptions({ pool: raw, consumer: 'c', handler: async () => {}, connectTimeoutMs: 0 }),
    ).toThrow(/connectTimeoutMs/);
  });

  it('a timeout is a fault of the environment: never counted, never a dead letter', () => {
    const err = new StatementTimeoutError('COMMIT', 30_000);
    expect(classifyDbError(err)).toBe('connection');
    expect(classifyDbError(new ConnectTimeoutError(10_000))).toBe('connection');
    expect(
      verdictOf(err, 'statement', {
        attempt: 5,
        maxAttempts: 5,
        classify: () => 'transient',
        isolation: 'read committed',
      }),
    ).toEqual({ kind: 'retry', spent: false });
  });

  it('names the statement by its first keyword, never its values', () => {
    expect(statementKind('  COMMIT')).toBe('COMMIT');
    expect(statementKind('/* once */ BEGIN; SET LOCAL x; INSERT ...')).toBe('BEGIN');
    expect(statementKind({ text: 'select 1' })).toBe('SELECT');
    expect(statementKind('')).toBe('statement');
  });

  it('warns once per pool whose settings lack keepAlive or connectionTimeoutMillis, naming them and the docs', () => {
    const warn = vi.fn();
    const logger = { debug() {}, info() {}, warn, error() {} };
    const bare = Object.assign(
      fakePool(async () => fakeClient().client),
      { options: { max: 10 } },
    );
    warnPoolSettings(boundPool(bare), logger);
    warnPoolSettings(bare, logger);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]![0]).toEqual({ missing: ['keepAlive: true', 'connectionTimeoutMillis'] });
    expect(warn.mock.calls[0]![1]).toMatch(/docs\/operations\.md/);
    const good = Object.assign(
      fakePool(async () => fakeClient().client),
      {
        options: { keepAlive: true, connectionTimeoutMillis: 5000 },
      },
    );
    warnPoolSettings(good, logger);
    const half = Object.assign(
      fakePool(async () => fakeClient().client),
      { options: { keepAlive: true } },
    );
    warnPoolSettings(half, logger);
    expect(warn).toHaveBeenCalledTimes(2);
    expect(warn.mock.calls[1]![0]).toEqual({ missing: ['connectionTimeoutMillis'] });
  });
});
