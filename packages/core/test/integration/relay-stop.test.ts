import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createOutbox,
  createRelay,
  migrate,
  type OutboxPublisher,
  type PgClientLike,
  type PgPoolLike,
  type QueryResultLike,
} from '../../src/index.js';
import { makePool } from './fixtures/db.js';

// stop() abandons every round under way and returns once the statements in flight have ended,
// whatever the publishers do; no publisher is called after stop() has begun; an abandoned round's
// rows stay pending with their attempts unchanged.
//
// The defect this pins (seen whenever this file ran alone): with concurrency 2, the second round
// loop's claim reached the server after stop() had abandoned the first round, whose COMMIT had
// released the row. The claim (FOR UPDATE SKIP LOCKED, which does not wait) then took that row
// and its round published it after stop(), a round stop() never knew of: stop() waited for its
// publisher until publishTimeoutMs, and the row ended marked sent when the publisher answered.

const admin = makePool(2);
const made: { schema: string; pool: pg.Pool }[] = [];
// stop() may wait for one statement in flight (a claim, its rollback); the rest is bookkeeping.
// Generous, for a loaded machine: the defect is a wait of publishTimeoutMs (10 minutes here).
const STOP_BOUND_MS = 1_000 + 10_000;

/**
 * A schema and a pool of the test's own: a relay claims rows of every destination in its
 * schema, and the pool shows what the relay left checked out.
 */
async function fresh(): Promise<{ schema: string; pool: pg.Pool }> {
  const schema = `relay_stop_${randomBytes(4).toString('hex')}`;
  const pool = makePool(8);
  made.push({ schema, pool });
  await migrate(pool, { schema });
  return { schema, pool };
}
afterAll(async () => {
  for (const m of made) {
    await admin.query(`DROP SCHEMA "${m.schema}" CASCADE`).catch(() => {});
    await m.pool.end().catch(() => {});
  }
  await admin.end();
});

/** A publisher that never settles and records any call made once `stopping()` is true. */
function neverSettles(stopping: () => boolean) {
  const calls: string[][] = [];
  const late: string[][] = [];
  const publisher: OutboxPublisher = {
    publish: (messages) => {
      const ids = messages.map((m) => m.id);
      calls.push(ids);
      if (stopping()) late.push(ids);
      return new Promise<void>(() => {});
    },
  };
  return { publisher, calls, late };
}

async function until(what: string, check: () => boolean, ms = 20_000): Promise<void> {
  const t0 = Date.now();
  while (!check()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Resolves to how long `p` took, or rejects when it outlives `ms` (a hang). */
async function within(p: Promise<unknown>, ms: number): Promise<number> {
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      p,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`still stopping after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
  return Date.now() - t0;
}

async function rowsOf(schema: string) {
  const { rows } = await admin.query<{ status: string; attempts: number; last_error: unknown }>(
    `SELECT status, attempts, last_error FROM "${schema}".outbox ORDER BY seq`,
  );
  return rows;
}

describe.each([1, 2, 4])('concurrency %i', (concurrency) => {
  it('stop() as soon as the one row is being published: returns, calls no publisher after it began, leaves the row pending', {
    timeout: 60_000,
  }, async () => {
    // The other round loops' first claims are still on their way to the server (a new
    // connection's first statement is the slowest) when stop() comes and the round holding the
    // row gives it up.
    const { schema, pool } = await fresh();
    let stopping = false;
    const p = neverSettles(() => stopping);
    await createOutbox({ pool, schema, destinations: ['d'] }).enqueue(pool, 'd', 'one', { messageId: 'm1' });
    const relay = createRelay({
      pool,
      schema,
      listen: false,
      concurrency,
      pollIntervalMs: 600_000,
      publishTimeoutMs: 600_000,
      publishers: { d: p.publisher },
    });
    await relay.start();
    await until('the row published', () => p.calls.length > 0);
    stopping = true;
    await within(relay.stop(), STOP_BOUND_MS);
    expect(p.late).toEqual([]);
    expect(p.calls).toEqual([['m1']]);
    expect(await rowsOf(schema)).toEqual([{ status: 'pending', attempts: 0, last_error: null }]);
    expect(pool.totalCount - pool.idleCount).toBe(0);
  });

  it('stop() while every round publishes to a publisher that never settles: returns, calls no publisher, leaves the rows pending', {
    timeout: 60_000,
  }, async () => {
    const { schema, pool } = await fresh();
    const destination = 'd';
    let stopping = false;
    const p = neverSettles(() => stopping);
    // Two rows a round, three rounds' worth per round loop: every round claims a full batch,
    // so every round loop has one publishing when stop() comes.
    const batchSize = 2;
    const box = createOutbox({ pool, schema, destinations: [destination] });
    for (let i = 0; i < batchSize * concurrency * 3; i++) await box.enqueue(pool, destination, `m${i}`);
    const relay = createRelay({
      pool,
      schema,
      listen: false,
      concurrency,
      batchSize,
      pollIntervalMs: 600_000,
      publishTimeoutMs: 600_000,
      publishers: { [destination]: p.publisher },
    });
    await relay.start();
    await until(`${concurrency} rounds publishing`, () => p.calls.length >= concurrency);
    stopping = true;
    await within(relay.stop(), STOP_BOUND_MS);
    expect(p.late).toEqual([]);
    expect(relay.health().running).toBe(false);
    // Abandoned, not lost: every row is still pending, no attempt counted, no error recorded.
    const rows = await rowsOf(schema);
    expect(rows).toHaveLength(batchSize * concurrency * 3);
    expect(rows.every((r) => r.status === 'pending' && r.attempts === 0 && r.last_error === null)).toBe(true);
    // Nothing of the relay's is left checked out of the pool.
    expect(pool.totalCount - pool.idleCount).toBe(0);
  });
});

/**
 * A pool whose clients hold back each claim after the first until `release()` is called, and
 * report each COMMIT or ROLLBACK that completed.
 */
function claimGate(base: PgPoolLike) {
  let claims = 0;
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const state = { held: 0, ends: 0 };
  const pool: PgPoolLike = {
    query: (text: string, values?: unknown[]) => base.query(text, values),
    async connect() {
      const client = await base.connect();
      const wrapped: PgClientLike = {
        async query<R>(text: string, values?: unknown[]): Promise<QueryResultLike<R>> {
          if (text.includes('SKIP LOCKED') && text.startsWith('BEGIN') && ++claims > 1) {
            state.held++;
            await gate;
          }
          const res = await client.query<R>(text, values);
          if (text === 'COMMIT' || text === 'ROLLBACK') state.ends++;
          return res;
        },
        release: (err?: Error | boolean) => client.release(err),
        on: (e, l) => client.on?.(e, l),
        off: (e, l) => client.off?.(e, l),
      };
      return wrapped;
    },
  };
  return { pool, state, release: () => open() };
}

it('a claim that returns after stop() began is rolled back: its rows are not published and stay pending', {
  timeout: 60_000,
}, async () => {
  const { schema, pool } = await fresh();
  const destination = 'race';
  let stopping = false;
  const p = neverSettles(() => stopping);
  const box = createOutbox({ pool, schema, destinations: [destination] });
  await box.enqueue(pool, destination, 'one', { messageId: 'race-1' });
  const gated = claimGate(pool);
  const relay = createRelay({
    pool: gated.pool,
    schema,
    listen: false,
    concurrency: 2,
    pollIntervalMs: 600_000,
    publishTimeoutMs: 600_000,
    publishers: { [destination]: p.publisher },
  });
  await relay.start();
  // The first round holds the row and publishes; the second round's claim waits at the gate.
  await until('the first round publishing and the second claim held', () => {
    return p.calls.length === 1 && gated.state.held === 1;
  });
  stopping = true;
  const stopped = relay.stop();
  // stop() abandons the first round, whose COMMIT releases the row; only then does the second
  // claim reach the server, as it did when a new connection's first query was slower than that.
  await until('the first round to end its transaction', () => gated.state.ends >= 1);
  gated.release();
  await within(stopped, STOP_BOUND_MS);
  expect(p.late).toEqual([]);
  expect(p.calls).toEqual([['race-1']]);
  expect(await rowsOf(schema)).toEqual([{ status: 'pending', attempts: 0, last_error: null }]);
  expect(pool.totalCount - pool.idleCount).toBe(0);
});

it('stop() during the LISTEN check at start: start() and stop() return at once, and no LISTEN connection is left behind', {
  timeout: 60_000,
}, async () => {
  const { schema, pool } = await fresh();
  // A LISTEN session that hears nothing (as behind PgBouncer in transaction mode): the check
  // waits its whole listenCheckMs.
  let probe: Promise<unknown> | undefined;
  const deaf: PgPoolLike = {
    query: (text: string, values?: unknown[]) => {
      const q = pool.query(text, values);
      if (text.startsWith('SELECT pg_notify')) probe = q;
      return q;
    },
    async connect() {
      const client = await pool.connect();
      const wrapped: PgClientLike = {
        // The probe too: once sends its autocommit statements on a connection of the pool
        // (bounded-pool.ts).
        query<R>(text: string, values?: unknown[]): Promise<QueryResultLike<R>> {
          const q = (client as PgClientLike).query<R>(text, values);
          if (text.startsWith('SELECT pg_notify')) probe = q;
          return q;
        },
        release: (err?: Error | boolean) => client.release(err),
        on: (e: string, l: (...args: never[]) => void) => {
          if (e !== 'notification') client.on?.(e as 'error', l as (err: Error) => void);
        },
        off: (e, l) => client.off?.(e, l),
      } as PgClientLike;
      return wrapped;
    },
  };
  const p = neverSettles(() => true);
  const relay = createRelay({
    pool: deaf,
    schema,
    listenCheckMs: 60_000,
    pollIntervalMs: 600_000,
    publishers: { none: p.publisher },
  });
  const starting = relay.start();
  await until('the LISTEN check', () => probe !== undefined);
  await within(Promise.all([starting, relay.stop()]), STOP_BOUND_MS);
  // The check's notification is a pool query of its own, not a connection the relay keeps.
  await probe?.catch(() => {});
  expect(relay.health()).toMatchObject({ running: false, listening: false });
  expect(pool.totalCount - pool.idleCount).toBe(0);
  expect(p.calls).toEqual([]);
});
