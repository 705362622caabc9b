import { createHash } from 'node:crypto';
import { migrateDatabases } from '@once/core';
import {
  createIdempotency,
  type HandleResult,
  type HttpResponseData,
  type Idempotency,
  type IdempotentRequest,
} from '@once/http';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabases, serviceEnv, type TestDatabases } from '../../../../test/support/index.js';
import { fingerprintInputV1 } from '../../src/fingerprint-v1.js';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenExpress } from '../support/bindings/express.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenFastify } from '../support/bindings/fastify.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenFetch } from '../support/bindings/fetch.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { createRoutes, createTestTables } from '../support/routes.mjs';

// @once/http over three real databases on the one server, a database per tenant, routed by the
// `x-tenant` header: each key's claim, the handler's writes, the stored response, its replays,
// 409s and 422s live in the tenant's database only. A request the router cannot place is a 500
// `unroutable` with nothing recorded anywhere; a database that is down answers its own requests
// 503 `unavailable` while the others are served. Through the Fetch, Fastify and Express bindings.

type Json = Record<string, unknown>;
type Listen = (o: unknown) => Promise<{ port: number; close: () => Promise<void> }>;
const BINDINGS: ReadonlyArray<readonly [string, Listen]> = [
  ['fetch', listenFetch as Listen],
  ['fastify', listenFastify as Listen],
  ['express', listenExpress as Listen],
];
const TENANTS = ['t0', 't1', 't2'] as const;

let dbs: TestDatabases;
let pools: pg.Pool[];
const databases = () => Object.fromEntries(TENANTS.map((t, i) => [t, pools[i]!]));

/** The test's router: the tenant header, which must be there. */
const byTenant = (request: IdempotentRequest): string => {
  const tenant = request.headers['x-tenant'];
  if (tenant === undefined) throw new Error('no x-tenant header');
  return tenant;
};

beforeAll(async () => {
  dbs = await createDatabases('http', 3);
  pools = dbs.urls.map((url) => {
    const p = new pg.Pool({ connectionString: url, max: 8 });
    p.on('error', () => {});
    return p;
  });
  await migrateDatabases(databases());
  for (const p of pools) await createTestTables(p, 'public');
}, 60_000);
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await dbs.drop();
});

/** Effects of `key` in each database, by principal: `[{ alice: 1 }, {}, {}]`. */
async function effectsOf(key: string): Promise<Array<Record<string, number>>> {
  return Promise.all(
    pools.map(async (p) => {
      const { rows } = await p.query<{ principal: string; n: number }>(
        'SELECT principal, count(*)::int AS n FROM public.http_effects WHERE key = $1 GROUP BY principal',
        [key],
      );
      return Object.fromEntries(rows.map((r) => [r.principal, r.n]));
    }),
  );
}

/** The inbox rows of `consumer` whose id ends with `/key`, in each database. */
async function rowsOf(consumer: string, key: string): Promise<string[][]> {
  return Promise.all(
    pools.map(async (p) => {
      const { rows } = await p.query<{ m: string }>(
        'SELECT message_id AS m FROM once.inbox WHERE consumer = $1 AND message_id LIKE $2 ORDER BY 1',
        [consumer, `%/${key}`],
      );
      return rows.map((r) => r.m);
    }),
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(BINDINGS)('%s binding over three databases', (name, listen) => {
  const consumer = `http.routed.${name}`;
  let base: string;
  let close: () => Promise<void>;
  const results: HandleResult[] = [];

  beforeAll(async () => {
    const engine = createIdempotency({ databases: databases(), route: byTenant, consumer, logger: false });
    const server = await listen({
      engine,
      routes: createRoutes({ pool: pools[0], schema: 'public' }),
      onResult: (r: HandleResult) => results.push(r),
    });
    base = `http://127.0.0.1:${server.port}`;
    close = server.close;
  });
  afterAll(async () => {
    await close?.();
  });

  let n = 0;
  const newKey = () => `k-${name}-${++n}-${Math.random().toString(36).slice(2, 8)}`;
  const post = (
    key: string | undefined,
    o: { tenant?: string; principal?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) =>
    fetch(`${base}/charges`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-principal': o.principal ?? `user@${o.tenant}`,
        ...(o.tenant === undefined ? {} : { 'x-tenant': o.tenant }),
        ...(key === undefined ? {} : { 'idempotency-key': key }),
        ...o.headers,
      },
      body: JSON.stringify(o.body ?? { amount: 100 }),
    });
  /** Sends until the answer is final (not a 409), as a retrying client does. */
  const settle = async (key: string, tenant: string, headers: Record<string, string> = {}) => {
    for (let i = 0; i < 50; i++) {
      const r = await post(key, { tenant, headers });
      if (r.status !== 409) return r;
      await r.arrayBuffer();
      await sleep(20);
    }
    throw new Error(`key ${key} still in flight`);
  };

  it('the same keys sent concurrently and again per tenant: one effect per key, in its database, replays from it', async () => {
    // The same key strings in every tenant (each tenant's principal in the scope): 3 × 4 keys,
    // each sent 4 times at once while the first holds its claim, then twice more.
    const keys = [0, 1, 2, 3].map(() => newKey());
    const sends = TENANTS.flatMap((tenant) =>
      keys.flatMap((key) =>
        Array.from({ length: 4 }, () => ({ key, tenant, headers: { 'x-hold-ms': '30' } })),
      ),
    );
    const first = await Promise.all(sends.map((s) => settle(s.key, s.tenant, s.headers)));
    const again = await Promise.all(sends.slice(0, 24).map((s) => settle(s.key, s.tenant)));
    const seqOf = new Map<string, string>();
    for (const [i, r] of [...first, ...again].entries()) {
      const s = sends[i % sends.length]!;
      expect(r.status).toBe(201);
      const body = (await r.json()) as Json;
      // The answer is the one stored in the tenant's database: its principal, its charge row.
      expect(body.principal).toBe(`user@${s.tenant}`);
      const seq = r.headers.get('x-charge-seq')!;
      const slot = `${s.tenant}/${s.key}`;
      if (seqOf.has(slot)) expect(seq).toBe(seqOf.get(slot));
      else seqOf.set(slot, seq);
    }
    expect(seqOf.size).toBe(12);
    const fresh = first.filter((r) => r.headers.get('idempotent-replayed') === null);
    expect(fresh).toHaveLength(12);
    for (const key of keys) {
      expect(await effectsOf(key)).toEqual(TENANTS.map((t) => ({ [`user@${t}`]: 1 })));
      expect(await rowsOf(consumer, key)).toEqual(TENANTS.map((t) => [`user%40${t}/${key}`]));
    }
    // The charge row each tenant's answer names is that tenant's database's row for the key.
    for (const [i, t] of TENANTS.entries()) {
      const { rows } = await pools[i]!.query<{ seq: string }>(
        'SELECT seq::text FROM public.http_effects WHERE key = $1',
        [keys[0]],
      );
      expect(rows.map((r) => r.seq)).toEqual([seqOf.get(`${t}/${keys[0]}`)]);
    }
  });

  it("another request with a tenant's key is a 422 there; the same key string in another tenant is its own key", async () => {
    const key = newKey();
    expect((await post(key, { tenant: 't1', body: { amount: 1 } })).status).toBe(201);
    const other = await post(key, { tenant: 't1', body: { amount: 2 } });
    expect(other.status).toBe(422);
    expect(((await other.json()) as Json).type).toMatch(/#key-mismatch$/);
    // In t2, under t2's principal, the same key with the other body is new.
    const t2 = await post(key, { tenant: 't2', body: { amount: 2 } });
    expect(t2.status).toBe(201);
    expect(t2.headers.get('idempotent-replayed')).toBeNull();
    expect(await effectsOf(key)).toEqual([{}, { 'user@t1': 1 }, { 'user@t2': 1 }]);
  });

  it("a key held in one tenant's database is a 409 there, and holds nothing in another", async () => {
    const key = newKey();
    const holding = post(key, { tenant: 't0', headers: { 'x-hold-ms': '1500' } });
    await sleep(200);
    const [inFlight, elsewhere] = await Promise.all([
      post(key, { tenant: 't0' }),
      post(key, { tenant: 't1' }),
    ]);
    expect(inFlight.status).toBe(409);
    expect(inFlight.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await inFlight.json()) as Json).type).toMatch(/#key-in-flight$/);
    expect(elsewhere.status).toBe(201);
    expect((await holding).status).toBe(201);
    expect(await effectsOf(key)).toEqual([{ 'user@t0': 1 }, { 'user@t1': 1 }, {}]);
  });

  it('one scope and key routed to a second database is refused with 500 unroutable, and runs nowhere', async () => {
    // A scope without the tenant in it (the same principal in two tenants): one key of one scope.
    const key = newKey();
    const first = await post(key, { tenant: 't0', principal: 'svc' });
    expect(first.status).toBe(201);
    const moved = await post(key, { tenant: 't2', principal: 'svc' });
    expect(moved.status).toBe(500);
    expect(moved.headers.get('content-type')).toBe('application/problem+json');
    const problem = (await moved.json()) as Json;
    expect(problem.type).toMatch(/docs\/http\.md#unroutable$/);
    expect(problem.detail).toBe(
      'the request could not be placed in a database: route() placed this Idempotency-Key in another database than before, and a key must stay in one database; nothing ran and nothing was recorded',
    );
    // Back in its own database it replays.
    const back = await post(key, { tenant: 't0', principal: 'svc' });
    expect(back.status).toBe(201);
    expect(back.headers.get('idempotent-replayed')).toBe('true');
    expect(await effectsOf(key)).toEqual([{ svc: 1 }, {}, {}]);
    expect(await rowsOf(consumer, key)).toEqual([[`svc/${key}`], [], []]);
  });

  it('a request the router cannot place is a 500 unroutable naming the cause, with nothing recorded anywhere', async () => {
    const key = newKey();
    const unknown = await post(key, { tenant: 'nowhere' });
    expect(unknown.status).toBe(500);
    const a = (await unknown.json()) as Json;
    expect(a).toMatchObject({
      status: 500,
      title: expect.stringMatching(/could not be placed in a database/),
    });
    expect(a.type).toMatch(/#unroutable$/);
    expect(a.detail).toBe(
      'the request could not be placed in a database: route() gave "nowhere", which names no database; nothing ran and nothing was recorded',
    );
    const thrown = await post(key, { principal: 'user@t0' });
    expect(thrown.status).toBe(500);
    expect(((await thrown.json()) as Json).detail).toBe(
      'the request could not be placed in a database: route() threw: no x-tenant header; nothing ran and nothing was recorded',
    );
    expect(await effectsOf(key)).toEqual([{}, {}, {}]);
    expect(await rowsOf(consumer, key)).toEqual([[], [], []]);
    const last = results.filter((r) => r.key === key).at(-1);
    expect(last).toMatchObject({ status: 'failed', error: { code: 'UNROUTABLE' } });
  });
});

describe('the engine over three databases', () => {
  const run =
    (status = 201) =>
    async (ctx: { tx: { query: (s: string, v?: unknown[]) => Promise<unknown> }; key: string }) => {
      await ctx.tx.query(
        "INSERT INTO public.http_effects (route, principal, key) VALUES ('engine', 'p', $1)",
        [ctx.key || 'unkeyed'],
      );
      return { status, headers: [], body: Buffer.from(String(status)) } satisfies HttpResponseData;
    };
  const request = (key: string | undefined, tenant: string, body = '{}'): IdempotentRequest => ({
    method: 'POST',
    target: '/notes',
    headers: {
      'x-tenant': tenant,
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: Buffer.from(body),
  });
  const engineOf = (consumer: string, extra: Record<string, unknown> = {}): Idempotency =>
    createIdempotency({ databases: databases(), route: byTenant, consumer, logger: false, ...extra });

  it('a request without a key runs in its tenant’s database', async () => {
    const engine = engineOf('engine.unkeyed');
    const marker = `unkeyed-${Math.random().toString(36).slice(2)}`;
    const r = await engine.handle(
      request(undefined, 't2'),
      'p',
      async (ctx) => {
        await ctx.tx.query(
          "INSERT INTO public.http_effects (route, principal, key) VALUES ('engine', 'p', $1)",
          [marker],
        );
        return { status: 201, headers: [], body: Buffer.alloc(0) };
      },
      { required: false },
    );
    expect(r.status).toBe('unkeyed');
    expect(await effectsOf(marker)).toEqual([{}, {}, { p: 1 }]);
  });

  it('lease mode: the stored response of a replay is read from the key’s database', async () => {
    const engine = engineOf('engine.lease', { mode: 'lease' });
    const key = `lease-${Math.random().toString(36).slice(2)}`;
    const first = await engine.handle(request(key, 't1'), 'p', run(201));
    expect(first.status).toBe('processed');
    const again = await engine.handle(request(key, 't1'), 'p', run(201));
    expect(again.status).toBe('replayed');
    expect(Buffer.from(again.response.body).toString()).toBe('201');
    expect(await effectsOf(key)).toEqual([{}, { p: 1 }, {}]);
  });

  it('a key stored under fingerprint version 1 is recognised from its own database', async () => {
    const engine = engineOf('engine.legacy');
    const key = `legacy-${Math.random().toString(36).slice(2)}`;
    const req = request(key, 't2', '{"a":1}');
    expect((await engine.handle(req, 'p', run(201))).status).toBe('processed');
    // Make the row as a build of fingerprint version 1 stored it, in t2 only.
    const v1 = createHash('sha256')
      .update(fingerprintInputV1(req, ['content-type']))
      .digest();
    const { rowCount } = await pools[2]!.query(
      "UPDATE once.inbox SET fingerprint = $1 WHERE consumer = 'engine.legacy' AND message_id = $2",
      [v1, `p/${key}`],
    );
    expect(rowCount).toBe(1);
    const again = await engine.handle(req, 'p', run(201));
    expect(again.status).toBe('replayed');
    expect(await effectsOf(key)).toEqual([{}, {}, { p: 1 }]);
  });

  it('one database down: its requests get 503 unavailable and run nowhere, the others are served; back, they run once', async () => {
    const engine = engineOf('engine.down');
    const name = dbs.names[1]!;
    const admin = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
    await admin.connect();
    const tag = Math.random().toString(36).slice(2);
    const keys = TENANTS.map((t) => `down-${t}-${tag}`);
    // Warm up t1 (its schema checked), then take it away.
    expect((await engine.handle(request(`warm-${tag}`, 't1'), 'p', run())).status).toBe('processed');
    try {
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
      for (let round = 0; round < 2; round++) {
        const got = await Promise.all(TENANTS.map((t, i) => engine.handle(request(keys[i], t), 'p', run())));
        expect(got.map((r) => r.response.status)).toEqual([201, 503, 201]);
        const down = got[1]!.response;
        expect(down.headers).toContainEqual(['content-type', 'application/problem+json']);
        expect(down.headers.some(([h, v]) => h === 'retry-after' && /^\d+$/.test(v))).toBe(true);
        expect(down.problem?.problem).toBe('unavailable');
        expect(got.map((r) => r.status)).toEqual(
          round === 0 ? ['processed', 'failed', 'processed'] : ['replayed', 'failed', 'replayed'],
        );
      }
      // A request without a key for t1 gets the same answer; one for t0 runs.
      const unkeyed = await Promise.all(
        ['t0', 't1'].map((t) => engine.handle(request(undefined, t), 'p', run(), { required: false })),
      );
      expect(unkeyed.map((r) => r.response.status)).toEqual([201, 503]);
      expect(unkeyed[1]!.response.problem?.problem).toBe('unavailable');
      expect(engine.inbox.databases).toEqual([...TENANTS]);
    } finally {
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
      await admin.end();
    }
    const after = await Promise.all(TENANTS.map((t, i) => engine.handle(request(keys[i], t), 'p', run())));
    expect(after.map((r) => r.status)).toEqual(['replayed', 'processed', 'replayed']);
    for (const [i, key] of keys.entries()) {
      expect(await effectsOf(key)).toEqual(TENANTS.map((_, j) => (j === i ? { p: 1 } : {})));
    }
  });
});
