import { request as httpRequest } from 'node:http';
import { migrate } from '@once/core';
import { getInboxRow } from '@once/core/admin';
import { createIdempotency, type HandleResult } from '@once/http';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenExpress } from '../support/bindings/express.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenFastify } from '../support/bindings/fastify.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenFetch } from '../support/bindings/fetch.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenNode } from '../support/bindings/node.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { createRoutes, createTestTables } from '../support/routes.mjs';

/** A parsed JSON body, read field by field. */
type Json = Record<string, unknown>;

// Every binding (Fetch, the node:http adapter, the Fastify 5 plugin, the Express 5 middleware)
// against real servers on 127.0.0.1 and fetch clients, on a real PostgreSQL; a schema per binding.
// One set of cases for all four, then the cases only one binding has (streaming refusal, raw body,
// hijack, schema validation before the claim).

type Listen = (o: unknown) => Promise<{ port: number; close: () => Promise<void> }>;
const BINDINGS: ReadonlyArray<readonly [string, Listen]> = [
  ['fetch', listenFetch as Listen],
  ['node', listenNode as Listen],
  ['fastify', listenFastify as Listen],
  ['express', listenExpress as Listen],
];

describe.each(BINDINGS)('%s binding', (name, listen) => {
  let pool: pg.Pool;
  let schema: string;
  let base: string;
  let close: () => Promise<void>;
  const results: HandleResult[] = [];

  // Resolves when the route's handler starts for `key` (the claim is held by then).
  const entered = new Map<string, () => void>();
  const handlerEntered = (key: string) => new Promise<void>((resolve) => entered.set(key, resolve));

  beforeAll(async () => {
    pool = createTestPool({ max: 5 });
    schema = freshSchemaName(`http_${name}`);
    await migrate(pool, { schema });
    await createTestTables(pool, schema);
    const engine = createIdempotency({ pool, schema, consumer: 'http.test', logger: false });
    const routes = createRoutes({ pool, schema });
    const charge = routes.charge;
    routes.charge = (ctx: unknown, input: { key?: string }) => {
      if (input.key !== undefined) entered.get(input.key)?.();
      return charge(ctx, input);
    };
    const server = await listen({
      engine,
      routes,
      onResult: (r: HandleResult) => results.push(r),
    });
    base = `http://127.0.0.1:${server.port}`;
    close = server.close;
  });
  afterAll(async () => {
    await close?.();
    await dropSchema(pool, schema);
    await pool.end();
  });

  let n = 0;
  const newKey = () => `k-${name}-${++n}-${Math.random().toString(36).slice(2)}`;
  const post = (
    key: string | undefined,
    opts: { principal?: string; body?: unknown; headers?: Record<string, string>; path?: string } = {},
  ) =>
    fetch(`${base}${opts.path ?? '/charges'}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-principal': opts.principal ?? 'alice',
        ...(key === undefined ? {} : { 'idempotency-key': key }),
        ...opts.headers,
      },
      body: JSON.stringify(opts.body ?? { amount: 100 }),
    });
  const effects = async (key: string, principal?: string): Promise<number> => {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${schema}".http_effects WHERE key = $1 AND ($2::text IS NULL OR principal = $2)`,
      [key, principal ?? null],
    );
    return rows[0].n;
  };
  const stored = async (key: string, principal = 'alice'): Promise<boolean> => {
    const { rowCount } = await pool.query(`SELECT 1 FROM "${schema}".inbox WHERE message_id = $1`, [
      `${principal}/${key}`,
    ]);
    return rowCount === 1;
  };

  it('runs 100 concurrent requests with one key once: the others get 409 or the replay', async () => {
    const key = newKey();
    const responses = await Promise.all(
      Array.from({ length: 100 }, () => post(key, { headers: { 'x-hold-ms': '50' } })),
    );
    const statuses = responses.map((r) => r.status);
    const bodies = await Promise.all(responses.map((r) => r.text()));
    expect(statuses.filter((s) => s !== 201 && s !== 409)).toEqual([]);
    const ok = bodies.filter((_, i) => statuses[i] === 201);
    expect(new Set(ok).size).toBe(1);
    const fresh = responses.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    expect(fresh).toHaveLength(1);
    for (const r of responses.filter((r) => r.status === 409))
      expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await effects(key)).toBe(1);
  });

  it('replays the same status, stored headers and body bytes, with fresh Date and no hop-by-hop headers', async () => {
    const key = newKey();
    const first = await post(key);
    const firstBytes = Buffer.from(await first.arrayBuffer());
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await post(key);
    const againBytes = Buffer.from(await again.arrayBuffer());
    expect(again.status).toBe(201);
    expect(againBytes.equals(firstBytes)).toBe(true);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('x-charge-seq')).toBe(first.headers.get('x-charge-seq'));
    expect(again.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    expect(first.headers.get('content-type')).toMatch(/^application\/json/);
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(again.headers.get('date')).not.toBeNull();
    // keep-alive from the handler is hop-by-hop: not stored (the server's own may be present)
    const { rows } = await pool.query(
      `SELECT response_headers FROM "${schema}".inbox WHERE consumer = 'http.test' AND message_id = $1`,
      [`alice/${key}`],
    );
    const names = (rows[0].response_headers as Array<[string, string]>).map(([h]) => h);
    expect(names).not.toContain('keep-alive');
    expect(names).not.toContain('date');
    expect(names).toContain('x-charge-seq');
    expect(await effects(key)).toBe(1);
    // what `once inspect` shows: the key's inbox row with its stored response
    const row = await getInboxRow(pool, schema, { consumer: 'http.test', messageId: `alice/${key}` });
    expect(row.status).toBe('done');
    expect(row.response?.status).toBe(201);
    expect(row.response?.body.equals(firstBytes)).toBe(true);
  });

  it('answers 422 to the same key with another body, and runs nothing', async () => {
    const key = newKey();
    expect((await post(key, { body: { amount: 1 } })).status).toBe(201);
    const other = await post(key, { body: { amount: 2 } });
    expect(other.status).toBe(422);
    expect(other.headers.get('content-type')).toBe('application/problem+json');
    expect(((await other.json()) as Json).type).toMatch(/key-mismatch$/);
    expect(await effects(key)).toBe(1);
    // key order and whitespace do not change a JSON body's fingerprint
    const same = await fetch(`${base}/charges`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-principal': 'alice', 'idempotency-key': key },
      body: ' { "amount" : 1 } ',
    });
    expect(same.status).toBe(201);
    expect(same.headers.get('idempotent-replayed')).toBe('true');
  });

  it.each([400, 402])('stores a %i with the claim, rolls back its writes, and replays it', async (status) => {
    const key = newKey();
    const first = await post(key, { headers: { 'x-status': String(status) } });
    expect(first.status).toBe(status);
    expect(await effects(key)).toBe(0);
    expect(await stored(key)).toBe(true);
    const again = await post(key);
    expect(again.status).toBe(status);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await effects(key)).toBe(0);
  });

  it.each([408, 409, 425, 429, 500, 503])(
    'never stores a %i: its writes roll back and the retry runs',
    async (status) => {
      const key = newKey();
      const first = await post(key, { headers: { 'x-status': String(status) } });
      expect(first.status).toBe(status);
      expect(await effects(key)).toBe(0);
      expect(await stored(key)).toBe(false);
      const again = await post(key);
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      expect(await effects(key)).toBe(1);
    },
  );

  it('stores nothing when the handler throws: a 500, and the retry runs', async () => {
    const key = newKey();
    const first = await post(key, { headers: { 'x-throw': '1' } });
    expect(first.status).toBe(500);
    // Fetch and node answer the problem themselves; Fastify and Express leave the answer to the
    // framework's error handling.
    if (name === 'fetch' || name === 'node')
      expect(first.headers.get('content-type')).toBe('application/problem+json');
    expect(await effects(key)).toBe(0);
    expect(await stored(key)).toBe(false);
    const again = await post(key);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(await effects(key)).toBe(1);
  });

  it('answers 5xx, never the handler 2xx, when a deferred constraint fails at COMMIT', async () => {
    const key = newKey();
    const first = await post(key, { headers: { 'x-deferred': '1' } });
    expect(first.status).toBe(500);
    expect(first.headers.get('content-type')).toBe('application/problem+json');
    expect(await effects(key)).toBe(0);
    expect(await stored(key)).toBe(false);
    const again = await post(key);
    expect(again.status).toBe(201);
    expect(await effects(key)).toBe(1);
  });

  it('gives two principals with one key their own responses', async () => {
    const key = newKey();
    const a = await post(key, { principal: 'alice' });
    const b = await post(key, { principal: 'bob' });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(((await a.json()) as Json).principal).toBe('alice');
    expect(((await b.json()) as Json).principal).toBe('bob');
    expect(await effects(key)).toBe(2);
  });

  it('refuses missing and bad keys with 400 problem+json, and runs nothing', async () => {
    const cases: Array<[string | undefined, RegExp]> = [
      [undefined, /key-missing$/],
      ['', /key-invalid$/],
      ['""', /key-invalid$/],
      ['x'.repeat(256), /key-invalid$/],
      ['a, b', /key-invalid$/],
      ['"unterminated', /key-invalid$/],
      ['"a", "b"', /key-invalid$/],
    ];
    const before = (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".http_effects`)).rows[0].n;
    for (const [key, type] of cases) {
      const res = await post(key);
      expect(res.status, String(key)).toBe(400);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(((await res.json()) as Json).type).toMatch(type);
    }
    // obs-text: a latin1 byte that fetch refuses to send, so through node:http's client
    const obs = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        `${base}/charges`,
        {
          method: 'POST',
          headers: {
            'idempotency-key': 'caf\u00e9',
            'x-principal': 'alice',
            'content-type': 'application/json',
          },
        },
        (res) => {
          let body = '';
          res.on('data', (c) => {
            body += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.end('{"amount":100}');
    });
    expect(obs.status).toBe(400);
    expect(JSON.parse(obs.body).type).toMatch(/key-invalid$/);
    expect(JSON.parse(obs.body).detail).toMatch(/obs-text/);
    const after = (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".http_effects`)).rows[0].n;
    expect(after).toBe(before);
  });

  it('takes a bare key of any printable ASCII but a comma, as Stripe does, and its quoted form as the same key', async () => {
    for (const bare of [`order:${newKey()}`, `a b ${newKey()}`, `x/y=z@w;${newKey()}`]) {
      const first = await post(bare);
      expect(first.status, bare).toBe(201);
      const again = await post(bare);
      expect(again.headers.get('idempotent-replayed'), bare).toBe('true');
      const quoted = await post(`"${bare}"`);
      expect(quoted.headers.get('idempotent-replayed'), bare).toBe('true');
      expect(await effects(bare)).toBe(1);
    }
  });

  it('takes a structured-field string and the bare token as one key', async () => {
    const key = newKey();
    expect((await post(`"${key}"`)).status).toBe(201);
    const bare = await post(key);
    expect(bare.status).toBe(201);
    expect(bare.headers.get('idempotent-replayed')).toBe('true');
    expect(await effects(key)).toBe(1);
  });

  it('commits a request whose client went away before COMMIT, and replays it', async () => {
    const key = newKey();
    const gone = new AbortController();
    const started = handlerEntered(key);
    const cut = fetch(`${base}/charges`, {
      method: 'POST',
      signal: gone.signal,
      headers: {
        'content-type': 'application/json',
        'x-principal': 'carol',
        'idempotency-key': key,
        'x-hold-ms': '500',
      },
      body: JSON.stringify({ amount: 100 }),
    }).catch(() => undefined);
    // Abort once the handler runs (the claim is taken), not after a fixed delay: under load a
    // fixed delay can cut the request before it reaches the server.
    await started;
    gone.abort();
    expect(await cut).toBeUndefined();
    // The committed effect appears once the handler's hold is over (a hang guard, not a timing).
    const until = Date.now() + 60_000;
    while ((await effects(key, 'carol')) === 0 && Date.now() < until)
      await new Promise((r) => setTimeout(r, 50));
    expect(await effects(key, 'carol')).toBe(1);
    const again = await post(key, { principal: 'carol' });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await effects(key, 'carol')).toBe(1);
  });

  it('reports every outcome to onResult', () => {
    const seen = new Set(results.map((r) => r.status));
    for (const s of [
      'processed',
      'replayed',
      'mismatch',
      'not-stored',
      'failed',
      'invalid-key',
      'missing-key',
    ]) {
      expect(seen.has(s as HandleResult['status']), s).toBe(true);
    }
  });

  // Only Fastify and Express: the framework's error handler picks the status of a throw.
  // Fastify sees the throw (onError) before its error handler picks a status: a throw stores
  // nothing, whatever the status. Express sees only the response the error handler wrote: a 4xx
  // is stored like any 4xx the handler sent.
  if (name === 'fastify' || name === 'express') {
    it(`${name === 'fastify' ? 'stores nothing for' : 'stores the response of'} a thrown error that the error handler answers with 404`, async () => {
      const key = newKey();
      const first = await post(key, { path: '/throw-404' });
      expect(first.status).toBe(404);
      expect(await effects(key)).toBe(0);
      expect(await stored(key)).toBe(name === 'express');
      const again = await post(key, { path: '/throw-404' });
      expect(again.status).toBe(404);
      expect(again.headers.get('idempotent-replayed')).toBe(name === 'express' ? 'true' : null);
    });

    const streamingPaths = name === 'express' ? ['/stream', '/pipe', '/flush'] : ['/stream', '/hijack'];
    it.each(streamingPaths)(
      'refuses a streamed response on %s: a 500, its writes rolled back, nothing stored',
      async (path) => {
        const key = newKey();
        const first = await post(key, { path });
        expect(first.status).toBe(500);
        const text = await first.text();
        expect(text).not.toMatch(/^ab|hijacked|late/);
        expect(await effects(key)).toBe(0);
        expect(await stored(key)).toBe(false);
        const refused = results.filter((r) => r.key === key);
        expect(refused.map((r) => r.status)).toEqual(['failed']);
        expect((refused[0]?.error as { code?: string } | undefined)?.code).toBe('HTTP_STREAMING_REFUSED');
      },
    );
  }

  if (name === 'fastify') {
    it('claims no key for a request that fails the route schema', async () => {
      const key = newKey();
      const bad = await post(key, { path: '/validated', body: { amount: 'many' } });
      expect(bad.status).toBe(400);
      expect(await stored(key)).toBe(false);
      const good = await post(key, { path: '/validated', body: { amount: 3 } });
      expect(good.status).toBe(201);
      expect(good.headers.get('idempotent-replayed')).toBeNull();
      expect(await effects(key)).toBe(1);
    });

    it('sends the answer once for a handler that calls reply.send() without returning the reply', async () => {
      const key = newKey();
      const first = await post(key, { path: '/no-return' });
      expect(first.status).toBe(201);
      const again = await post(key, { path: '/no-return' });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.text()).toBe(await first.text());
      expect(await effects(key)).toBe(1);
    });

    it("rolls back a handler that throws after reply.send(): the error handler's answer, nothing stored", async () => {
      const key = newKey();
      const first = await post(key, { path: '/send-then-throw' });
      expect(first.status).toBe(503);
      expect(await effects(key)).toBe(0);
      expect(await stored(key)).toBe(false);
      const again = await post(key, { path: '/send-then-throw' });
      expect(again.status).toBe(503);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      expect(await effects(key)).toBe(0);
    });

    it('throws HTTP_NOT_IDEMPOTENT for request.idempotent on a route not marked idempotent', async () => {
      const res = await post(newKey(), { path: '/plain' });
      expect(res.status).toBe(500);
      expect(((await res.json()) as Json).code).toBe('HTTP_NOT_IDEMPOTENT');
    });
  }

  if (name === 'express') {
    it('fails with HTTP_RAW_BODY_MISSING when a parser consumed the body without keepRawBody', async () => {
      const key = newKey();
      const res = await post(key, { path: '/no-raw' });
      expect(res.status).toBe(500);
      expect(((await res.json()) as Json).code).toBe('HTTP_RAW_BODY_MISSING');
      expect(await stored(key)).toBe(false);
      expect(await effects(key)).toBe(0);
    });

    it('holds back res.writeHead + res.end until COMMIT and replays them', async () => {
      const key = newKey();
      const first = await post(key, { path: '/write-head' });
      expect(first.status).toBe(201);
      expect(first.headers.get('x-raw')).toBe('a, b');
      const body = await first.text();
      expect(body).toMatch(/^charge \d+$/);
      const again = await post(key, { path: '/write-head' });
      expect(again.status).toBe(201);
      expect(again.headers.get('x-raw')).toBe('a, b');
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.text()).toBe(body);
      expect(await effects(key)).toBe(1);
    });

    it('answers 413 to an unparsed body over bodyLimitBytes, and claims nothing', async () => {
      const key = newKey();
      const res = await post(key, { path: '/small', body: { amount: 100, note: 'more than sixteen bytes' } });
      expect(res.status).toBe(413);
      expect(((await res.json()) as Json).code).toBe('HTTP_BODY_TOO_LARGE');
      expect(await stored(key)).toBe(false);
      expect(await effects(key)).toBe(0);
    });

    it('reads an unparsed body itself, fingerprints its bytes, and leaves it in req.body as a Buffer', async () => {
      const key = newKey();
      const first = await post(key, { path: '/unparsed', body: { amount: 7 } });
      expect(first.status).toBe(201);
      expect(((await first.json()) as Json).amount).toBeNull();
      const again = await post(key, { path: '/unparsed', body: { amount: 7 } });
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      const other = await post(key, { path: '/unparsed', body: { amount: 8 } });
      expect(other.status).toBe(422);
      expect(await effects(key)).toBe(1);
    });
  }
});
