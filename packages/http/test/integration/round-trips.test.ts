import { migrate, type PgPoolLike } from '@once/core';
import { createIdempotency, type HttpResponseData, type IdempotentRequest } from '@once/http';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';

// What a keyed request sends to PostgreSQL, statement by statement (a multi-statement string is
// one round trip): a new key as a plain route's BEGIN, write, COMMIT; a replay one round trip and
// a ROLLBACK the answer does not wait for. And the paths that keep those counts honest: a rival
// that commits while the claim waits, a stored 4xx, a 2xx whose transaction had failed.

let raw: pg.Pool;
let schema: string;

beforeAll(async () => {
  raw = createTestPool({ max: 6 });
  schema = freshSchemaName('http_round_trips');
  await migrate(raw, { schema });
  await raw.query(`CREATE TABLE "${schema}".charges (key text, amount int)`);
});
afterAll(async () => {
  await dropSchema(raw, schema);
  await raw.end();
});

/** A pool that records every statement text sent through it. */
function recording(): { pool: PgPoolLike; sent: string[] } {
  const sent: string[] = [];
  const pool = {
    query: (t: string, v?: unknown[]) => {
      sent.push(t);
      return raw.query(t, v);
    },
    async connect() {
      const c = await raw.connect();
      return {
        query: (t: string, v?: unknown[]) => {
          sent.push(t);
          return c.query(t, v);
        },
        release: (e?: Error | boolean) => c.release(e),
        on: (e: 'error', l: (err: Error) => void) => c.on(e, l),
        off: (e: 'error', l: (err: Error) => void) => c.off(e, l),
      };
    },
  } as unknown as PgPoolLike;
  return { pool, sent };
}

const request = (key: string): IdempotentRequest => ({
  method: 'POST',
  target: '/charges',
  route: '/charges',
  headers: { 'idempotency-key': key, 'content-type': 'application/json' },
  body: Buffer.from('{"amount":5}'),
});
const created = (key: string): HttpResponseData => ({
  status: 201,
  headers: [['content-type', 'application/json']],
  body: Buffer.from(JSON.stringify({ key })),
});
const charges = async (key: string) =>
  (await raw.query(`SELECT count(*)::int AS n FROM "${schema}".charges WHERE key = $1`, [key])).rows[0].n;
const idle = async (pool: pg.Pool) => {
  // The replay's ROLLBACK runs after the answer: wait for its connection to come back.
  for (let i = 0; i < 200 && pool.idleCount < pool.totalCount; i++)
    await new Promise((r) => setTimeout(r, 5));
};

describe('round trips of a keyed request', () => {
  it('a new key: three round trips (BEGIN + claim + read + savepoint, the effect, store + COMMIT); a replay: the claim’s, then ROLLBACK', async () => {
    const { pool, sent } = recording();
    const engine = createIdempotency({ pool, schema, consumer: 'rt.first', logger: false });
    await engine.handle(request('warm'), 'p', async () => created('warm')); // the schema check
    sent.length = 0;
    const first = await engine.handle(request('k1'), 'p', async (ctx) => {
      await ctx.tx.query(`INSERT INTO "${schema}".charges VALUES ($1, 5)`, [ctx.key]);
      return created(ctx.key);
    });
    expect(first.status).toBe('processed');
    expect(sent).toHaveLength(3);
    expect(sent[0]).toMatch(
      /^BEGIN ISOLATION LEVEL READ COMMITTED; INSERT INTO .* ON CONFLICT DO NOTHING; SELECT status, .*; SAVEPOINT once_http_handler$/s,
    );
    expect(sent[2]).toMatch(/^UPDATE .*; COMMIT$/s);
    sent.length = 0;
    const replay = await engine.handle(request('k1'), 'p', async () => {
      throw new Error('a replay never runs the handler');
    });
    expect(replay.status).toBe('replayed');
    expect(replay.response.status).toBe(201);
    expect(Buffer.from(replay.response.body).toString()).toBe(JSON.stringify({ key: 'k1' }));
    await idle(raw);
    expect(sent).toEqual([expect.stringMatching(/^BEGIN .*; INSERT INTO .*; SELECT status/s), 'ROLLBACK']);
    expect(await charges('k1')).toBe(1);
  });

  it('a stored 4xx: its writes and outbox rows rolled back in the COMMIT round trip, the claim kept', async () => {
    const { pool, sent } = recording();
    const engine = createIdempotency({ pool, schema, consumer: 'rt.4xx', logger: false });
    await engine.handle(request('warm'), 'p', async () => created('warm'));
    sent.length = 0;
    const refused = await engine.handle(request('k4'), 'p', async (ctx) => {
      await ctx.tx.query(`INSERT INTO "${schema}".charges VALUES ($1, 5)`, [ctx.key]);
      return { status: 402, headers: [], body: Buffer.from('declined') };
    });
    expect(refused.status).toBe('processed');
    expect(sent).toHaveLength(3);
    expect(sent[2]).toMatch(/^ROLLBACK TO SAVEPOINT once_http_handler; UPDATE /);
    expect(await charges('k4')).toBe(0);
    const replay = await engine.handle(request('k4'), 'p', async () => created('k4'));
    expect(replay.response.status).toBe(402);
  });

  it('a 2xx whose transaction had failed (a swallowed query error) answers 500 and stores nothing', async () => {
    const engine = createIdempotency({ pool: raw, schema, consumer: 'rt.swallow', logger: false });
    const r = await engine.handle(request('ks'), 'p', async (ctx) => {
      await ctx.tx.query(`INSERT INTO "${schema}".charges VALUES ($1, 5)`, [ctx.key]);
      await ctx.tx.query('SELECT 1 / 0').catch(() => {});
      return created(ctx.key);
    });
    expect(r.response.status).toBe(500);
    expect(await charges('ks')).toBe(0);
    const retry = await engine.handle(request('ks'), 'p', async () => created('ks'));
    expect(retry.status).toBe('processed');
  });

  it('a rival that commits while the claim waits on it: the read after the claim sees its row and replays it', async () => {
    const { pool, sent } = recording();
    const engine = createIdempotency({
      pool,
      schema,
      consumer: 'rt.rival',
      logger: false,
      lockTimeoutMs: 30_000,
    });
    await engine.handle(request('warm'), 'p', async () => created('warm')); // the schema check
    sent.length = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let entered!: () => void;
    const inside = new Promise<void>((r) => {
      entered = r;
    });
    const holder = engine.handle(request('kr'), 'p', async (ctx) => {
      await ctx.tx.query(`INSERT INTO "${schema}".charges VALUES ($1, 5)`, [ctx.key]);
      entered();
      await gate;
      return created(ctx.key);
    });
    await inside;
    let ran = false;
    const waiter = engine.handle(request('kr'), 'p', async () => {
      ran = true;
      return created('kr');
    });
    // The waiter's claim is blocked on the holder's row lock (a bound, not a timing).
    for (let i = 0; i < 400; i++) {
      const waiting = await raw.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%SAVEPOINT once_http_handler%'`,
      );
      if (waiting.rows[0].n > 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    release();
    expect((await holder).status).toBe('processed');
    const second = await waiter;
    expect(second.status).toBe('replayed');
    expect(second.response.status).toBe(201);
    expect(ran).toBe(false);
    expect(await charges('kr')).toBe(1);
    // The read after the claim, a statement of its own, saw the rival's row: no other read.
    expect(sent.filter((t) => !/^(BEGIN|INSERT|UPDATE|ROLLBACK$)/.test(t))).toEqual([]);
  });
});
