import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import fastifyCompress from '@fastify/compress';
import fastifyCors from '@fastify/cors';
import fastifyEtag from '@fastify/etag';
import { migrate } from '@once/core';
import { createIdempotency } from '@once/http';
import { fastifyIdempotency } from '@once/http/fastify';
import Fastify, { type FastifyInstance } from 'fastify';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';

// Plugins that change responses (issue #26, item 7), with @once/http/fastify: what is stored is
// the route's own answer, and @fastify/compress, @fastify/etag and @fastify/cors apply afresh to
// every response, replays included. So a replay to a client that sends no Accept-Encoding is
// readable, a 304 of @fastify/etag is never the key's stored answer, and a replay carries the
// CORS headers of its own request's Origin.

let pool: pg.Pool;
let schema: string;

beforeAll(async () => {
  pool = createTestPool({ max: 4 });
  schema = freshSchemaName('http_fastify_plugins');
  await migrate(pool, { schema });
  await pool.query(`CREATE TABLE "${schema}".reports (seq bigserial PRIMARY KEY, key text)`);
});
afterAll(async () => {
  await dropSchema(pool, schema);
  await pool.end();
});

/** A 10 KiB JSON report (the same bytes every time for `fixed`, else with the run's row). */
const report = (seq: string | null) => ({
  seq,
  rows: Array.from({ length: 200 }, (_, i) => ({ i, label: `row ${i} of the report`, ok: i % 2 === 0 })),
});

/**
 * The application, with @fastify/etag registered before the plugin or after it; @fastify/compress
 * goes first in the first case and last in the second (its hooks are route-level: the plugin's
 * answer is taken before them either way).
 */
async function app(etagFirst: boolean): Promise<{ port: number; close: () => Promise<void> }> {
  const a: FastifyInstance = Fastify({ logger: false });
  if (!etagFirst) await a.register(fastifyCompress, { global: true, threshold: 1024 });
  await a.register(fastifyCors, { origin: true });
  if (etagFirst) await a.register(fastifyEtag);
  await a.register(fastifyIdempotency, {
    idempotency: createIdempotency({ pool, schema, consumer: `plugins.${etagFirst}`, logger: false }),
    scope: () => 'acct',
  });
  if (!etagFirst) await a.register(fastifyEtag);
  if (etagFirst) await a.register(fastifyCompress, { global: true, threshold: 1024 });
  a.post('/reports', { config: { idempotent: true } }, async (request, reply) => {
    const { rows } = await request.idempotent.tx.query<{ seq: string }>(
      `INSERT INTO "${schema}".reports (key) VALUES ($1) RETURNING seq`,
      [request.idempotent.key],
    );
    const fixed = request.headers['x-fixed'] === '1';
    return reply.code(201).send(report(fixed ? null : (rows[0]?.seq ?? null)));
  });
  await a.listen({ host: '127.0.0.1', port: 0 });
  return { port: (a.server.address() as AddressInfo).port, close: () => a.close() };
}

interface Raw {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}
/** A POST through node:http, which sends only the headers given and decodes nothing. */
function post(port: number, key: string, headers: Record<string, string> = {}): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path: '/reports',
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end('{}');
  });
}

const effects = async (key: string) =>
  (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".reports WHERE key = $1`, [key])).rows[0]
    .n as number;
const storedRow = async (consumer: string, key: string) =>
  (
    await pool.query(
      `SELECT response_status, response_headers FROM "${schema}".inbox WHERE consumer = $1 AND message_id = $2`,
      [consumer, `acct/${key}`],
    )
  ).rows[0] as { response_status: number; response_headers: Array<[string, string]> } | undefined;

let n = 0;
const newKey = () => `plug-${++n}-${Math.random().toString(36).slice(2, 8)}`;

describe('@fastify/compress and @fastify/cors registered first, @fastify/etag after @once/http/fastify', () => {
  let server: { port: number; close: () => Promise<void> };
  beforeAll(async () => {
    server = await app(false);
  });
  afterAll(async () => {
    await server?.close();
  });

  it('stores the uncompressed answer: a replay without Accept-Encoding is readable, one with gzip is compressed again', async () => {
    const key = newKey();
    const first = await post(server.port, key, { 'accept-encoding': 'gzip' });
    expect(first.status).toBe(201);
    expect(first.headers['content-encoding']).toBe('gzip');
    const json = JSON.parse(gunzipSync(first.body).toString('utf8'));
    expect(json.rows).toHaveLength(200);
    const plain = await post(server.port, key);
    expect(plain.status).toBe(201);
    expect(plain.headers['idempotent-replayed']).toBe('true');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(plain.body.toString('utf8'))).toEqual(json);
    const zipped = await post(server.port, key, { 'accept-encoding': 'gzip' });
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(gunzipSync(zipped.body).toString('utf8'))).toEqual(json);
    expect(await effects(key)).toBe(1);
    const row = await storedRow('plugins.false', key);
    expect(row?.response_headers.map(([h]) => h)).not.toContain('content-encoding');
  });

  it("answers a replay's If-None-Match with 304 and stores the 201, never the 304", async () => {
    const key = newKey();
    const first = await post(server.port, key);
    const etag = first.headers.etag as string;
    expect(etag).toMatch(/^"/);
    const conditional = await post(server.port, key, { 'if-none-match': etag });
    expect(conditional.status).toBe(304);
    // a new key whose first request carries a matching If-None-Match: the 201 is stored, the client gets 304
    const fixedKey = newKey();
    const fixed = await post(server.port, fixedKey, { 'x-fixed': '1' });
    const other = newKey();
    const cond = await post(server.port, other, {
      'x-fixed': '1',
      'if-none-match': fixed.headers.etag as string,
    });
    expect(cond.status).toBe(304);
    expect((await storedRow('plugins.false', other))?.response_status).toBe(201);
    const replay = await post(server.port, other, { 'x-fixed': '1' });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(JSON.parse(replay.body.toString('utf8')).rows).toHaveLength(200);
    expect(await effects(other)).toBe(1);
  });

  it("gives a replay the CORS headers of its own request's Origin, and stores none", async () => {
    const key = newKey();
    const a = await post(server.port, key, { origin: 'https://a.example' });
    expect(a.headers['access-control-allow-origin']).toBe('https://a.example');
    const b = await post(server.port, key, { origin: 'https://b.example' });
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(b.headers['access-control-allow-origin']).toBe('https://b.example');
    const none = await post(server.port, key);
    expect(none.headers['idempotent-replayed']).toBe('true');
    expect(none.headers['access-control-allow-origin']).toBeUndefined();
    const row = await storedRow('plugins.false', key);
    expect(row?.response_headers.map(([h]) => h)).not.toContain('access-control-allow-origin');
  });
});

describe('@fastify/etag registered before @once/http/fastify, @fastify/compress last', () => {
  let server: { port: number; close: () => Promise<void> };
  beforeAll(async () => {
    server = await app(true);
  });
  afterAll(async () => {
    await server?.close();
  });

  it('stores the uncompressed answer there too', async () => {
    const key = newKey();
    const first = await post(server.port, key, { 'accept-encoding': 'gzip' });
    expect(first.headers['content-encoding']).toBe('gzip');
    const plain = await post(server.port, key);
    expect(plain.headers['idempotent-replayed']).toBe('true');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(plain.body.toString('utf8'))).toEqual(
      JSON.parse(gunzipSync(first.body).toString('utf8')),
    );
  });

  it('never stores the 304 @fastify/etag made of the first answer: the retry without the condition runs', async () => {
    const fixed = await post(server.port, newKey(), { 'x-fixed': '1' });
    expect(fixed.status).toBe(201);
    const key = newKey();
    const cond = await post(server.port, key, {
      'x-fixed': '1',
      'if-none-match': fixed.headers.etag as string,
    });
    expect(cond.status).toBe(304);
    expect(await storedRow('plugins.true', key)).toBeUndefined();
    expect(await effects(key)).toBe(0);
    const retry = await post(server.port, key, { 'x-fixed': '1' });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(JSON.parse(retry.body.toString('utf8')).rows).toHaveLength(200);
    expect(await effects(key)).toBe(1);
  });
});
