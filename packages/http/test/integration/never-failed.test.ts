import { migrate, PermanentError } from '@once/core';
import {
  createIdempotency,
  type HttpResponseData,
  type IdempotentContext,
  type IdempotentRequest,
} from '@once/http';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';

// A request is never recorded failed: whatever the handler did wrong (a lease-mode step mistake,
// a PermanentError, its deadline), nothing is kept for the key, and the next request with it,
// after the fix, runs and gets its 2xx.

let pool: pg.Pool;
let schema: string;

beforeAll(async () => {
  pool = createTestPool({ max: 6 });
  schema = freshSchemaName('http_never_failed');
  await migrate(pool, { schema });
});
afterAll(async () => {
  await dropSchema(pool, schema);
  await pool.end();
});

const request = (key: string): IdempotentRequest => ({
  method: 'POST',
  target: '/charges',
  route: '/charges',
  headers: { 'idempotency-key': key },
  body: Buffer.from('{"amount":1}'),
});
const created: HttpResponseData = { status: 201, headers: [], body: Buffer.from('created') };
const statusOf = async (consumer: string, key: string) =>
  (
    await pool.query(`SELECT status FROM "${schema}".inbox WHERE consumer = $1 AND message_id = $2`, [
      consumer,
      `p/${key}`,
    ])
  ).rows[0]?.status as string | undefined;

type Mistake = (ctx: IdempotentContext) => Promise<unknown>;

/** What a handler can get wrong in lease mode, each a permanent error in core's eyes. */
const MISTAKES: Record<string, Mistake> = {
  INVALID_STEP_NAME: (ctx) => ctx.step('', async () => 1),
  STEP_NAME_REUSED: async (ctx) => {
    await ctx.step('charge', async () => 1);
    await ctx.step('charge', async () => 2);
  },
  STEPS_CONCURRENT: (ctx) =>
    Promise.all([
      ctx.step('a', () => new Promise((r) => setTimeout(() => r(1), 20))),
      ctx.step('b', async () => 2),
    ]),
  STEP_RESULT_NOT_SERIALIZABLE: (ctx) => ctx.step('big', async () => 10n),
  PermanentError: async () => {
    throw new PermanentError('the handler says this cannot work');
  },
};

describe('lease mode: a handler mistake records nothing', () => {
  for (const [name, mistake] of Object.entries(MISTAKES)) {
    it(`${name}: 500, no failed row, and the retry after the fix runs and answers 2xx`, async () => {
      const consumer = `never-failed-${name.toLowerCase()}`;
      const engine = createIdempotency({
        pool,
        schema,
        consumer,
        mode: { lease: { leaseMs: 5_000 } },
        logger: false,
      });
      const key = `k-${name}`;
      const broken = await engine.handle(request(key), 'p', async (ctx) => {
        await mistake(ctx);
        return created;
      });
      expect(broken.response.status).toBe(500);
      expect(await statusOf(consumer, key)).not.toBe('failed');
      let ran = 0;
      const fixed = await engine.handle(request(key), 'p', async (ctx) => {
        ran++;
        await ctx.step('charge-fixed', async () => 'ch_1');
        return created;
      });
      expect(fixed.status).toBe('processed');
      expect(fixed.response.status).toBe(201);
      expect(ran).toBe(1);
      expect(await statusOf(consumer, key)).toBe('done');
      const replay = await engine.handle(request(key), 'p', async () => created);
      expect(replay.status).toBe('replayed');
    });
  }

  it('a handler past its deadline: 500, no failed row; once the lease is free the retry runs and answers 2xx', async () => {
    const consumer = 'never-failed-deadline';
    const engine = createIdempotency({
      pool,
      schema,
      consumer,
      mode: { lease: { leaseMs: 300 } },
      handlerTimeoutMs: 100,
      logger: false,
    });
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const slow = await engine.handle(request('k-deadline'), 'p', async () => {
      await gate;
      return created;
    });
    release();
    expect(slow.response.status).toBe(500);
    expect(await statusOf(consumer, 'k-deadline')).not.toBe('failed');
    // The abandoned handler keeps the lease until it runs out (a late step may still record):
    // until then a retry is told 409; after it, the retry runs. A bound, not a timing.
    let fixed = await engine.handle(request('k-deadline'), 'p', async () => created);
    for (let i = 0; i < 100 && fixed.status === 'in-flight'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      fixed = await engine.handle(request('k-deadline'), 'p', async () => created);
    }
    expect(fixed.status).toBe('processed');
    expect(fixed.response.status).toBe(201);
  });

  it('a handler past its deadline for the fifth time (maxAttempts in core) still records nothing', async () => {
    const consumer = 'never-failed-deadline-5';
    const engine = createIdempotency({
      pool,
      schema,
      consumer,
      mode: { lease: { leaseMs: 50 } },
      handlerTimeoutMs: 20,
      logger: false,
    });
    const never = new Promise<HttpResponseData>(() => {});
    let failures = 0;
    // A hang guard, not a timing: every 409 waits for the short lease to run out.
    const until = Date.now() + 60_000;
    while (failures < 6 && Date.now() < until) {
      const r = await engine.handle(request('k-deadline-5'), 'p', () => never);
      if (r.status === 'failed') failures++;
      else await new Promise((res) => setTimeout(res, 30));
    }
    expect(failures).toBe(6);
    expect(await statusOf(consumer, 'k-deadline-5')).not.toBe('failed');
    let fixed = await engine.handle(request('k-deadline-5'), 'p', async () => created);
    while (fixed.status === 'in-flight' && Date.now() < until + 10_000) {
      await new Promise((r) => setTimeout(r, 30));
      fixed = await engine.handle(request('k-deadline-5'), 'p', async () => created);
    }
    expect(fixed.status).toBe('processed');
  });
});

describe('transaction mode: a handler mistake records nothing', () => {
  it('a PermanentError: 500, no row, and the retry runs and answers 2xx', async () => {
    const consumer = 'never-failed-tx';
    const engine = createIdempotency({ pool, schema, consumer, logger: false });
    const broken = await engine.handle(request('k-tx'), 'p', async () => {
      throw new PermanentError('not now');
    });
    expect(broken.response.status).toBe(500);
    expect(await statusOf(consumer, 'k-tx')).toBeUndefined();
    const fixed = await engine.handle(request('k-tx'), 'p', async () => created);
    expect(fixed.status).toBe('processed');
  });
});
