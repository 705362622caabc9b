import { createOutbox, migrate } from '@once/core';
import { createIdempotency, type HttpResponseData, type IdempotentRequest } from '@once/http';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';

// The engine without a server: what a binding gets back from handle(), for the paths the
// binding tests do not reach (outbox rows, unkeyed routes, an unusable schema or scope).

let pool: pg.Pool;
let schema: string;

beforeAll(async () => {
  pool = createTestPool({ max: 3 });
  schema = freshSchemaName('http_engine');
  await migrate(pool, { schema });
  await pool.query(`CREATE TABLE "${schema}".notes (key text)`);
});
afterAll(async () => {
  await dropSchema(pool, schema);
  await pool.end();
});

const request = (key: string | undefined): IdempotentRequest => ({
  method: 'POST',
  target: '/notes',
  headers: key === undefined ? {} : { 'idempotency-key': key },
  body: Buffer.from('{}'),
});
const answer = (status: number): HttpResponseData => ({
  status,
  headers: [],
  body: Buffer.from(String(status)),
});
const count = async (table: string) =>
  (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".${table}`)).rows[0].n as number;

describe('Idempotency.handle', () => {
  it('commits ctx.publish rows with the key, and rolls them back with a stored 4xx', async () => {
    const outbox = createOutbox({ pool, schema, destinations: ['notes'] });
    const engine = createIdempotency({ pool, schema, outbox, consumer: 'engine.outbox', logger: false });
    const before = await count('outbox');
    const ok = await engine.handle(request('k1'), 'p', async (ctx) => {
      await ctx.publish('notes', { n: 1 });
      return answer(201);
    });
    expect(ok.status).toBe('processed');
    expect(await count('outbox')).toBe(before + 1);
    const refused = await engine.handle(request('k2'), 'p', async (ctx) => {
      await ctx.publish('notes', { n: 2 });
      return answer(404);
    });
    expect(refused.status).toBe('processed');
    expect(refused.response.status).toBe(404);
    expect(await count('outbox')).toBe(before + 1);
    const replay = await engine.handle(request('k2'), 'p', async () => answer(201));
    expect(replay.status).toBe('replayed');
    expect(replay.response.status).toBe(404);
  });

  it('runs a request without a key on a route that does not require one, every time, in a transaction', async () => {
    const engine = createIdempotency({ pool, schema, consumer: 'engine.unkeyed', logger: false });
    const before = await count('notes');
    const run = async (ctx: { tx: { query: (s: string, v?: unknown[]) => Promise<unknown> } }) => {
      await ctx.tx.query(`INSERT INTO "${schema}".notes (key) VALUES ('unkeyed')`);
      return answer(201);
    };
    for (let i = 0; i < 2; i++) {
      const r = await engine.handle(request(undefined), 'p', run, { required: false });
      expect(r.status).toBe('unkeyed');
    }
    expect(await count('notes')).toBe(before + 2);
    // a 4xx rolls the plain transaction back too
    const refused = await engine.handle(
      request(undefined),
      'p',
      async (ctx) => {
        await ctx.tx.query(`INSERT INTO "${schema}".notes (key) VALUES ('unkeyed')`);
        return answer(400);
      },
      { required: false },
    );
    expect(refused.response.status).toBe(400);
    expect(await count('notes')).toBe(before + 2);
    const missing = await engine.handle(request(undefined), 'p', run);
    expect(missing.status).toBe('missing-key');
  });

  it('answers 503 with Retry-After when once’s schema is missing, and runs nothing', async () => {
    const engine = createIdempotency({
      pool,
      schema: `${schema}_absent`,
      consumer: 'engine.absent',
      logger: false,
    });
    let ran = false;
    const r = await engine.handle(request('k'), 'p', async () => {
      ran = true;
      return answer(201);
    });
    expect(r.response.status).toBe(503);
    expect(r.response.headers.some(([n]) => n === 'retry-after')).toBe(true);
    expect(ran).toBe(false);
  });

  it('answers 500 for a scope that is empty, and runs nothing', async () => {
    const engine = createIdempotency({ pool, schema, consumer: 'engine.scope', logger: false });
    const r = await engine.handle(request('k'), '', async () => answer(201));
    expect(r.status).toBe('failed');
    expect(r.response.status).toBe(500);
  });

  it('refuses bad options, naming the field', () => {
    expect(() => createIdempotency({ pool, maxKeyLength: 300 })).toThrow(/maxKeyLength/);
    expect(() => createIdempotency({ pool, fingerprintHeaders: ['Content-Type'] })).toThrow(
      /fingerprintHeaders/,
    );
    expect(() => createIdempotency({ pool, mode: 'eventual' as never })).toThrow(/mode/);
  });
});
