import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BINDING_NAMES, type BindingApp, pairs, startBinding } from '../support/in-process.js';

// Writes after the response (issue #26, item 4): a route answers 201 and then writes two rows
// through ctx.tx, each after a random delay. On no binding may one row of a pair commit without
// the other. Fastify commits after the handler's promise settles, so both commit with the key;
// Express (at res.end) and the Fetch handler's return (node included) end the route's writes, so
// both are refused with TX_REVOKED and neither reaches PostgreSQL.

const REQUESTS = 200;
const UNKEYED = 50;
const CONCURRENCY = 10;

async function inParallel<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: limit }, async () => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) await fn(next);
    }),
  );
}

describe.each(BINDING_NAMES)('%s binding: writes after the response', (name) => {
  let app: BindingApp;
  beforeAll(async () => {
    app = await startBinding(name);
  });
  afterAll(async () => {
    await app?.close();
  });

  const expected = name === 'fastify' ? 'written' : 'TX_REVOKED';

  const check = async (ids: readonly string[]) => {
    // Every late pair has ended one way or the other (a hang guard, not a timing).
    const until = Date.now() + 60_000;
    while (ids.some((id) => !pairs.has(id)) && Date.now() < until)
      await new Promise((r) => setTimeout(r, 20));
    const outcomes = new Map<string, number>();
    for (const id of ids)
      outcomes.set(pairs.get(id) ?? 'unfinished', (outcomes.get(pairs.get(id) ?? 'unfinished') ?? 0) + 1);
    expect(Object.fromEntries(outcomes)).toEqual({ [expected]: ids.length });
    const { rows } = await app.pool.query<{ key: string; a: number; b: number }>(
      `SELECT key, count(*) FILTER (WHERE part = 'a')::int AS a, count(*) FILTER (WHERE part = 'b')::int AS b
         FROM "${app.schema}".http_pairs WHERE key = ANY($1) GROUP BY key`,
      [ids],
    );
    const half = rows.filter((r) => r.a !== r.b);
    expect(half).toEqual([]);
    expect(rows.length).toBe(name === 'fastify' ? ids.length : 0);
    console.log(
      `${name}: ${ids.length} requests answered then wrote a pair: ${expected} for all, ${rows.length} pairs committed whole, none half`,
    );
  };

  it(`never commits half of two writes made after the answer (${REQUESTS} keyed requests, random delays)`, async () => {
    const keys = Array.from(
      { length: REQUESTS },
      (_, i) => `after-${name}-${i}-${Math.random().toString(36).slice(2, 8)}`,
    );
    const statuses: number[] = [];
    await inParallel(keys, CONCURRENCY, async (key) => {
      const res = await app.post('/after-response', key, { headers: { 'x-after-ms': '15' } });
      statuses.push(res.status);
      await res.arrayBuffer();
    });
    expect(statuses.filter((s) => s !== 201)).toEqual([]);
    await check(keys);
    for (const key of keys.slice(0, 20)) expect(await app.effects(key)).toBe(1);
  });

  if (name === 'fastify') {
    it('refuses the late writes of a handler that already ended (a timer after `return reply.send()`)', async () => {
      const keys = Array.from({ length: 50 }, (_, i) => `ret-${i}-${Math.random().toString(36).slice(2, 8)}`);
      await inParallel(keys, CONCURRENCY, async (key) => {
        const res = await app.post('/after-return', key, { headers: { 'x-after-ms': '5' } });
        expect(res.status).toBe(201);
        await res.arrayBuffer();
      });
      const until = Date.now() + 60_000;
      while (keys.some((k) => !pairs.has(k)) && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      expect(new Set(keys.map((k) => pairs.get(k)))).toEqual(new Set(['TX_REVOKED']));
      const { rows } = await app.pool.query(
        `SELECT count(*)::int AS n FROM "${app.schema}".http_pairs WHERE key = ANY($1)`,
        [keys],
      );
      expect(rows[0].n).toBe(0);
    });
  }

  it(`never commits half of them without a key either (${UNKEYED} requests)`, async () => {
    const ids = Array.from(
      { length: UNKEYED },
      (_, i) => `req-${name}-${i}-${Math.random().toString(36).slice(2, 8)}`,
    );
    await inParallel(ids, CONCURRENCY, async (id) => {
      const res = await app.post('/after-response', undefined, {
        headers: { 'x-after-ms': '15', 'x-request-id': id },
      });
      expect(res.status).toBe(201);
      await res.arrayBuffer();
    });
    await check(ids);
  });
});
