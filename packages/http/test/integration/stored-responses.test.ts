import { randomBytes } from 'node:crypto';
import { migrate } from '@once/core';
import { createIdempotency, type HttpResponseData, type IdempotentRequest } from '@once/http';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';

// The response a key keeps, as core writes it: with COMMIT in a simple query whose values are SQL
// literals (transaction mode), or with the fenced `done` (lease mode). Whatever the bytes and the
// header values, a replay gives them back unchanged, and a stored 4xx undoes the handler's writes.

let pool: pg.Pool;
let schema: string;

beforeAll(async () => {
  pool = createTestPool({ max: 4 });
  schema = freshSchemaName('http_stored');
  await migrate(pool, { schema });
  await pool.query(`CREATE TABLE "${schema}".charges (key text)`);
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
  body: Buffer.from('{}'),
});
const charges = async (key: string) =>
  (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".charges WHERE key = $1`, [key])).rows[0].n;

describe('stored responses', () => {
  for (const mode of ['transaction', 'lease'] as const) {
    it(`${mode} mode: every byte value, a 2 MiB body and header values with quotes, backslashes and non-ASCII replay unchanged`, async () => {
      const engine = createIdempotency({ pool, schema, consumer: `stored.${mode}`, mode, logger: false });
      const body = Buffer.concat([
        Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
        randomBytes(2 * 1024 * 1024),
      ]);
      const answer: HttpResponseData = {
        status: 201,
        headers: [
          ['x-quote', `it's "quoted" \\ back\\slashed \\x00 $1 E'x'`],
          ['x-unicode', 'café – 日本 – 😀'],
          ['set-cookie', 'a=1'],
          ['set-cookie', 'b=2'],
        ],
        body,
      };
      const first = await engine.handle(request('k-bytes'), 'p', async () => answer);
      expect(first.status).toBe('processed');
      const replay = await engine.handle(request('k-bytes'), 'p', async () => {
        throw new Error('not run');
      });
      expect(replay.status).toBe('replayed');
      expect(replay.response.status).toBe(201);
      expect(Buffer.from(replay.response.body).equals(body)).toBe(true);
      expect(replay.response.headers.filter(([n]) => n !== 'idempotent-replayed')).toEqual(answer.headers);
    });

    it(`${mode} mode: a 4xx is stored and its writes through ctx.tx are undone; a 2xx without ctx.tx is stored too`, async () => {
      const engine = createIdempotency({ pool, schema, consumer: `stored4xx.${mode}`, mode, logger: false });
      const refused = await engine.handle(request('k-402'), 'p', async (ctx) => {
        await ctx.tx.query(`INSERT INTO "${schema}".charges VALUES ($1)`, [`${mode}-402`]);
        return { status: 402, headers: [], body: Buffer.from('declined') };
      });
      expect(refused.status).toBe('processed');
      expect(await charges(`${mode}-402`)).toBe(0);
      const again = await engine.handle(request('k-402'), 'p', async () => ({
        status: 201,
        headers: [],
        body: Buffer.from('x'),
      }));
      expect(again.status).toBe('replayed');
      expect(again.response.status).toBe(402);
      const bare = await engine.handle(request('k-bare'), 'p', async () => ({
        status: 200,
        headers: [],
        body: Buffer.from('ok'),
      }));
      expect(bare.status).toBe('processed');
      const bareReplay = await engine.handle(request('k-bare'), 'p', async () => ({
        status: 500,
        headers: [],
        body: Buffer.alloc(0),
      }));
      expect(bareReplay.status).toBe('replayed');
      expect(Buffer.from(bareReplay.response.body).toString()).toBe('ok');
    });
  }
});
