import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { migrate } from '@once/core';
import * as NewHttp from '@once/http';
import * as NewExpress from '@once/http/express';
import * as NewFastify from '@once/http/fastify';
import * as NewFetch from '@once/http/fetch';
import * as NewNode from '@once/http/node';
import express from 'express';
import Fastify from 'fastify';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName, httpAtCommit } from '../../../../test/support/index.js';

// Fingerprint version 2 against keys stored by the build before it (72da536, fingerprint version
// 1), built from the repository's history by test/support/core-builds.ts: a key that build stored
// still replays for a retry that is byte-identical on the same target, through each binding, and
// a retry that is not the same request is still a 422. A retry spanning the upgrade is compared
// as the old build compared it (docs/http.md, "Upgrades"): what version 1 could not tell apart
// (here the query string) it still cannot, for the keys it stored, until they expire.

const OLD = '72da536';
type Build = {
  http: typeof NewHttp;
  fetch: typeof NewFetch;
  node: typeof NewNode;
  fastify: typeof NewFastify;
  express: typeof NewExpress;
};
const NEW: Build = {
  http: NewHttp,
  fetch: NewFetch,
  node: NewNode,
  fastify: NewFastify,
  express: NewExpress,
};

let pool: pg.Pool;
let schema: string;
let old: Build;

beforeAll(async () => {
  old = (await httpAtCommit(OLD)) as unknown as Build;
  pool = createTestPool({ max: 6 });
  schema = freshSchemaName('http_upgrade');
  await migrate(pool, { schema });
  await pool.query(`CREATE TABLE "${schema}".charges (seq bigserial PRIMARY KEY, key text, amount numeric)`);
}, 300_000);
afterAll(async () => {
  await dropSchema(pool, schema);
  await pool.end();
});

type Tx = { query: (sql: string, values?: unknown[]) => Promise<{ rows: Array<{ seq: string }> }> };
const charge = async (tx: Tx, key: string, amount: unknown) =>
  (
    await tx.query(`INSERT INTO "${schema}".charges (key, amount) VALUES ($1, $2) RETURNING seq`, [
      key,
      amount,
    ])
  ).rows[0]?.seq;

interface Running {
  url: string;
  close(): Promise<void>;
}

const listen = async (server: Server): Promise<Running> => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
};

/** The same application on one build: POST /accounts/:id/charges, idempotent. */
const APPS: Record<string, (b: Build, consumer: string) => Promise<Running>> = {
  async fetch(b, consumer) {
    const engine = b.http.createIdempotency({ pool, schema, consumer, logger: false });
    const handler = b.fetch.idempotentFetch(engine, {
      scope: (req) => req.headers.get('x-principal') ?? 'anonymous',
      handler: async (req, ctx) => {
        const { amount } = (await req.json()) as { amount: unknown };
        return Response.json({ charge: await charge(ctx.tx as Tx, ctx.key, amount) }, { status: 201 });
      },
    });
    return listen(createServer(b.node.nodeListener(handler)));
  },
  async fastify(b, consumer) {
    const app = Fastify({ logger: false });
    await app.register(b.fastify.fastifyIdempotency, {
      idempotency: b.http.createIdempotency({ pool, schema, consumer, logger: false }),
      scope: (request) => String(request.headers['x-principal'] ?? 'anonymous'),
    });
    app.post('/accounts/:id/charges', { config: { idempotent: true } }, async (request, reply) => {
      const { amount } = request.body as { amount: unknown };
      const seq = await charge(request.idempotent.tx as Tx, request.idempotent.key, amount);
      return reply.code(201).send({ charge: seq });
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    return {
      url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
      close: () => app.close(),
    };
  },
  async express(b, consumer) {
    const app = express();
    const idempotent = b.express.expressIdempotency({
      idempotency: b.http.createIdempotency({ pool, schema, consumer, logger: false }),
      scope: (req) => String(req.headers['x-principal'] ?? 'anonymous'),
    });
    const router = express.Router();
    router.post(
      '/accounts/:id/charges',
      express.json({ verify: b.express.keepRawBody }),
      idempotent(),
      async (req, res) => {
        res
          .status(201)
          .json({ charge: await charge(req.idempotent.tx as Tx, req.idempotent.key, req.body.amount) });
      },
    );
    app.use('/', router);
    return listen(createServer(app));
  },
};

describe.each(Object.keys(APPS))('%s binding across the fingerprint upgrade', (name) => {
  const consumer = `upgrade.${name}`;
  let before: Running;
  let after: Running;
  beforeAll(async () => {
    before = await APPS[name]!(old, consumer);
    after = await APPS[name]!(NEW, consumer);
  });
  afterAll(async () => {
    await before?.close();
    await after?.close();
  });

  const post = (server: Running, key: string, path: string, body: string) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-principal': 'acct', 'idempotency-key': key },
      body,
    });
  const effects = async (key: string) =>
    (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".charges WHERE key = $1`, [key])).rows[0]
      .n as number;

  let n = 0;
  const newKey = () => `up-${name}-${++n}-${Math.random().toString(36).slice(2, 8)}`;

  it('replays a key the old build stored, for a byte-identical retry on the same target', async () => {
    const key = newKey();
    const first = await post(before, key, '/accounts/A/charges?capture=1', '{"amount": 5}');
    expect(first.status).toBe(201);
    const firstBody = await first.text();
    const retry = await post(after, key, '/accounts/A/charges?capture=1', '{"amount": 5}');
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.text()).toBe(firstBody);
    expect(await effects(key)).toBe(1);
    // and again: the row is unchanged, still the old fingerprint's
    const again = await post(after, key, '/accounts/A/charges?capture=1', '{"amount": 5}');
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });

  it('answers 422 to a retry of an old key that is another request (another body)', async () => {
    const key = newKey();
    expect((await post(before, key, '/accounts/A/charges', '{"amount": 5}')).status).toBe(201);
    const other = await post(after, key, '/accounts/A/charges', '{"amount": 6}');
    expect(other.status).toBe(422);
    expect(await effects(key)).toBe(1);
  });

  it('compares a retry of an old key as the old build did: what version 1 could not tell apart (the query) replays', async () => {
    const key = newKey();
    expect((await post(before, key, '/accounts/A/charges?capture=1', '{"amount": 5}')).status).toBe(201);
    const other = await post(after, key, '/accounts/A/charges?capture=0', '{"amount": 5}');
    expect(other.status).toBe(201);
    expect(other.headers.get('idempotent-replayed')).toBe('true');
    expect(await effects(key)).toBe(1);
  });

  it('keys stored after the upgrade are compared under version 2', async () => {
    const key = newKey();
    expect((await post(after, key, '/accounts/A/charges?capture=1', '{"amount": 5}')).status).toBe(201);
    expect((await post(after, key, '/accounts/A/charges?capture=0', '{"amount": 5}')).status).toBe(422);
    const same = await post(after, key, '/accounts/A/charges?capture=1', '{"amount":5.0}');
    expect(same.headers.get('idempotent-replayed')).toBe('true');
    expect(await effects(key)).toBe(1);
  });
});
