import { request as httpRequest } from 'node:http';
import { migrate } from '@once/core';
import { getInboxRow } from '@once/core/admin';
import { createIdempotency, type HandleResult } from '@once/http';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenFetch } from '../support/bindings/fetch.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { listen as listenNode } from '../support/bindings/node.mjs';
// @ts-expect-error plain JavaScript shared with the child server processes
import { createRoutes, createTestTables } from '../support/routes.mjs';

// The Fetch binding and the node:http adapter against real servers on 127.0.0.1 and fetch
// clients, on a real PostgreSQL. Each binding gets its own schema.

type Listen = (o: unknown) => Promise<{ port: number; close: () => Promise<void> }>;
const BINDINGS: ReadonlyArray<readonly [string, Listen]> = [
  ['fetch', listenFetch as Listen],
  ['node', listenNode as Listen],
];

describe.each(BINDINGS)('%s binding', (name, listen) => {
  let pool: pg.Pool;
  let schema: string;
  let base: string;
  let close: () => Promise<void>;
  const results: HandleResult[] = [];

  beforeAll(async () => {
    pool = createTestPool({ max: 5 });
    schema = freshSchemaName(`http_${name}`);
    await migrate(pool, { schema });
    await createTestTables(pool, schema);
    const engine = createIdempotency({ pool, schema, consumer: 'http.test', logger: false });
    const server = await listen({
      engine,
      routes: createRoutes({ pool, schema }),
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
    opts: { principal?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) =>
    fetch(`${base}/charges`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-principal': opts.principal ?? 'alice',
        ...(key === undefined ? {} : { 'idempotency-key': key }),
        ...opts.headers,
      },
      body: JSON.stringify(opts.body ?? { amount: 100 }),
    });
  const effects = async (key: string): Promise<number> => {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${schema}".http_effects WHERE key = $1`,
      [key],
    );
    return rows[0].n;
  };

  it('runs 100 concurrent requests with one key once: the others get 409 or the replay', async () => {
    const key = newKey();
    const responses = await Promise.all(
      Array.from({ length: 100 }, () => post(key, { headers: { 'x-hold-ms': '50' } })),
    );
    const statuses = responses.map((r) => r.status);
    const bodies = await Promise.all(responses.map((r) => r.text()));
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const ok = bodies.filter((_, i) => statuses[i] === 201);
    expect(ok.length).toBeGreaterThanOrEqual(1);
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
    expect(again.headers.get('content-type')).toBe('application/json');
    expect(again.headers.get('date')).not.toBeNull();
    // keep-alive from the handler is hop-by-hop: not stored (the server's own may be present)
    const { rows } = await pool.query(
      `SELECT response_headers FROM "${schema}".inbox WHERE consumer = 'http.test' AND message_id = $1`,
      [`alice/${key}`],
    );
    const stored = rows[0].response_headers as Array<[string, string]>;
    expect(stored.map(([n]) => n)).not.toContain('keep-alive');
    expect(stored.map(([n]) => n)).not.toContain('date');
    expect(stored.map(([n]) => n)).toContain('x-charge-seq');
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
    expect(((await other.json()) as { type: string }).type).toMatch(/key-mismatch$/);
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

  it('stores a 4xx with the claim, rolls back its writes, and replays it', async () => {
    const key = newKey();
    const first = await post(key, { headers: { 'x-status': '400' } });
    expect(first.status).toBe(400);
    expect(await effects(key)).toBe(0);
    const again = await post(key);
    expect(again.status).toBe(400);
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
      const again = await post(key);
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBeNull();
      expect(await effects(key)).toBe(1);
    },
  );

  it('stores nothing when the handler throws: 500 problem, and the retry runs', async () => {
    const key = newKey();
    const first = await post(key, { headers: { 'x-throw': '1' } });
    expect(first.status).toBe(500);
    expect(first.headers.get('content-type')).toBe('application/problem+json');
    expect(await effects(key)).toBe(0);
    const again = await post(key);
    expect(again.status).toBe(201);
    expect(await effects(key)).toBe(1);
  });

  it('answers 5xx, never the handler 2xx, when a deferred constraint fails at COMMIT', async () => {
    const key = newKey();
    const first = await post(key, { headers: { 'x-deferred': '1' } });
    expect(first.status).toBe(500);
    expect(await effects(key)).toBe(0);
    const row = await pool.query(`SELECT 1 FROM "${schema}".inbox WHERE message_id = $1`, [`alice/${key}`]);
    expect(row.rowCount).toBe(0);
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
    expect(((await a.json()) as { principal: string }).principal).toBe('alice');
    expect(((await b.json()) as { principal: string }).principal).toBe('bob');
    expect(await effects(key)).toBe(2);
  });

  it('refuses missing and bad keys with 400 problem+json, and runs nothing', async () => {
    const cases: Array<[string | undefined, RegExp]> = [
      [undefined, /key-missing$/],
      ['', /key-invalid$/],
      ['""', /key-invalid$/],
      ['x'.repeat(256), /key-invalid$/],
      ['a b', /key-invalid$/],
      ['"unterminated', /key-invalid$/],
      ['"a", "b"', /key-invalid$/],
      ['abc;x', /key-invalid$/],
    ];
    const before = (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".http_effects`)).rows[0].n;
    for (const [key, type] of cases) {
      const res = await post(key);
      expect(res.status, String(key)).toBe(400);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(((await res.json()) as { type: string }).type).toMatch(type);
    }
    // obs-text: a latin1 byte fetch would refuse to send, so through node:http's client
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
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.end('{"amount":100}');
    });
    expect(obs.status).toBe(400);
    expect(JSON.parse(obs.body).detail).toMatch(/obs-text/);
    const after = (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".http_effects`)).rows[0].n;
    expect(after).toBe(before);
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
    const pending = post(key, { headers: { 'x-hold-ms': '300' } });
    void pending.catch(() => {});
    const aborted = fetch(`${base}/charges`, {
      method: 'POST',
      signal: gone.signal,
      headers: {
        'content-type': 'application/json',
        'x-principal': 'carol',
        'idempotency-key': key,
        'x-hold-ms': '300',
      },
      body: JSON.stringify({ amount: 100 }),
    }).catch(() => undefined);
    setTimeout(() => gone.abort(), 50);
    await aborted;
    await pending;
    let count = 0;
    for (let i = 0; i < 100 && count === 0; i++) {
      const { rows } = await pool.query(
        `SELECT count(*)::int AS n FROM "${schema}".http_effects WHERE key = $1 AND principal = 'carol'`,
        [key],
      );
      count = rows[0].n;
      if (count === 0) await new Promise((r) => setTimeout(r, 50));
    }
    expect(count).toBe(1);
    const again = await post(key, { principal: 'carol' });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
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
      expect(seen.has(s as HandleResult['status'])).toBe(true);
    }
  });
});
