import { createOutbox, migrate } from '@once/core';
import { createIdempotency, type HttpResponseData, type IdempotentRequest } from '@once/http';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';

// A request without a key on a `required: false` route: the same transaction as a keyed one
// (synchronous_commit and lock_timeout pinned, the handler's deadline, a handle revoked at the
// end), and never a 2xx for writes that did not commit.

let pool: pg.Pool;
/** A pool whose sessions default to asynchronous commit and no lock timeout. */
let lax: pg.Pool;
let schema: string;

beforeAll(async () => {
  pool = createTestPool({ max: 4 });
  lax = createTestPool({ max: 2, options: '-c synchronous_commit=off -c lock_timeout=0' });
  schema = freshSchemaName('http_unkeyed');
  await migrate(pool, { schema });
  await pool.query(`CREATE TABLE "${schema}".notes (key text)`);
});
afterAll(async () => {
  await dropSchema(pool, schema);
  await pool.end();
  await lax.end();
});

const unkeyed: IdempotentRequest = {
  method: 'POST',
  target: '/notes',
  route: '/notes',
  headers: {},
  body: Buffer.from('{}'),
};
const answer = (status: number): HttpResponseData => ({
  status,
  headers: [],
  body: Buffer.from(String(status)),
});
const count = async (table: string, where = 'true') =>
  (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".${table} WHERE ${where}`)).rows[0]
    .n as number;
const note = (tag: string) => `INSERT INTO "${schema}".notes (key) VALUES ('${tag}')`;

describe('a request without a key', () => {
  it('answers 500, never 2xx, when its transaction rolled back (a swallowed failed query), and its outbox rows are not sent', async () => {
    const outbox = createOutbox({ pool, schema, destinations: ['notes'] });
    const engine = createIdempotency({ pool, schema, outbox, consumer: 'unkeyed.swallow', logger: false });
    const outboxBefore = await count('outbox');
    const r = await engine.handle(
      unkeyed,
      'p',
      async (ctx) => {
        await ctx.tx.query(note('swallowed'));
        await ctx.publish('notes', { tag: 'swallowed' });
        // The handler catches a failed query and carries on: PostgreSQL answers COMMIT with ROLLBACK.
        await ctx.tx.query('SELECT 1 / 0').catch(() => {});
        return answer(201);
      },
      { required: false },
    );
    expect(r.status).toBe('failed');
    expect(r.response.status).toBe(500);
    expect(await count('notes', "key = 'swallowed'")).toBe(0);
    // Nothing for a relay to send: the outbox row rolled back with the writes.
    expect(await count('outbox')).toBe(outboxBefore);
  });

  it('runs with synchronous_commit on and the lock timeout pinned, whatever the session says', async () => {
    const engine = createIdempotency({
      pool: lax,
      schema,
      consumer: 'unkeyed.pinned',
      lockTimeoutMs: 1500,
      logger: false,
    });
    let seen: { sync: string; lock: string } | undefined;
    const r = await engine.handle(
      unkeyed,
      'p',
      async (ctx) => {
        const sync = (await ctx.tx.query('SHOW synchronous_commit')).rows[0].synchronous_commit as string;
        const lock = (await ctx.tx.query('SHOW lock_timeout')).rows[0].lock_timeout as string;
        seen = { sync, lock };
        return answer(201);
      },
      { required: false },
    );
    expect(r.status).toBe('unkeyed');
    expect(seen).toEqual({ sync: 'on', lock: '1500ms' });
    // The session's own setting is back after the transaction (SET LOCAL).
    expect((await lax.query('SHOW synchronous_commit')).rows[0].synchronous_commit).toBe('off');
  });

  it('answers 500 at the handler deadline, rolls back, and refuses the handler’s later queries', async () => {
    const engine = createIdempotency({
      pool,
      schema,
      consumer: 'unkeyed.deadline',
      handlerTimeoutMs: 200,
      logger: false,
    });
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let late: unknown;
    let aborted = false;
    const lateDone = new Promise<void>((done) => {
      void engine
        .handle(
          unkeyed,
          'p',
          async (ctx) => {
            await ctx.tx.query(note('before-deadline'));
            ctx.signal.addEventListener('abort', () => {
              aborted = true;
            });
            await gate;
            try {
              await ctx.tx.query(note('after-deadline'));
            } catch (err) {
              late = err;
            }
            done();
            return answer(201);
          },
          { required: false },
        )
        .then((r) => {
          expect(r.status).toBe('failed');
          expect(r.response.status).toBe(500);
          release();
        });
    });
    await lateDone;
    expect(aborted).toBe(true);
    expect((late as { code?: string }).code).toBe('TX_REVOKED');
    expect(await count('notes', "key IN ('before-deadline', 'after-deadline')")).toBe(0);
  }, 20_000);

  it('commits a 2xx and answers it; rolls back a 4xx or 5xx and answers it as it is', async () => {
    const outbox = createOutbox({ pool, schema, destinations: ['notes'] });
    const engine = createIdempotency({ pool, schema, outbox, consumer: 'unkeyed.statuses', logger: false });
    const outboxBefore = await count('outbox');
    for (const status of [201, 404, 503]) {
      const r = await engine.handle(
        unkeyed,
        'p',
        async (ctx) => {
          await ctx.tx.query(note(`status-${status}`));
          await ctx.publish('notes', { status });
          return answer(status);
        },
        { required: false },
      );
      expect(r.response.status).toBe(status);
      expect(r.status).toBe(status === 503 ? 'not-stored' : 'unkeyed');
      expect(await count('notes', `key = 'status-${status}'`)).toBe(status === 201 ? 1 : 0);
    }
    expect(await count('outbox')).toBe(outboxBefore + 1);
  });

  it('answers 503 with Retry-After when the database cannot be reached, and runs nothing', async () => {
    const dead = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/test', max: 1 });
    dead.on('error', () => {});
    const engine = createIdempotency({ pool: dead, schema, consumer: 'unkeyed.dead', logger: false });
    let ran = false;
    const r = await engine.handle(
      unkeyed,
      'p',
      async () => {
        ran = true;
        return answer(201);
      },
      { required: false },
    );
    await dead.end();
    expect(ran).toBe(false);
    expect(r.response.status).toBe(503);
    expect(r.response.headers.some(([n]) => n === 'retry-after')).toBe(true);
  });
});
