import { afterAll, beforeAll, expect, it } from 'vitest';
import { createInbox, purge } from '../../src/index.js';
import { envelope, freshDb } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_purge', 10);
});
afterAll(async () => {
  await db.close();
});

it('purge removes only expired rows, in batches, beside live consumers and another purger', async () => {
  const handler = async () => {};
  const short = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'short',
    retentionMs: 1000,
    handler,
  });
  const long = createInbox({ pool: db.pool, schema: db.schema, consumer: 'long', handler });
  for (let b = 0; b < 25; b++) {
    await short.processBatch(Array.from({ length: 100 }, (_, i) => envelope(`e${b}-${i}`)));
  }
  await long.processBatch(Array.from({ length: 50 }, (_, i) => envelope(`keep${i}`)));
  await new Promise((r) => setTimeout(r, 1100));

  let live = true;
  const consumers = (async () => {
    let n = 0;
    while (live) await long.processBatch(Array.from({ length: 20 }, () => envelope(`live${n++}`)));
    return n;
  })();
  const progress: number[] = [];
  const [a, b] = await Promise.all([
    purge(db.pool, { schema: db.schema, batchSize: 100, onProgress: (d) => progress.push(d) }),
    purge(db.pool, { schema: db.schema, batchSize: 100 }),
  ]);
  live = false;
  const liveCount = await consumers;
  expect(a + b).toBe(2500);
  expect(progress.length).toBeGreaterThan(1);
  expect(Math.max(...progress.map((p, i) => p - (progress[i - 1] ?? 0)))).toBeLessThanOrEqual(100);
  const left = await db.pool.query(
    `SELECT consumer, count(*)::int AS n FROM ${db.schema}.inbox GROUP BY consumer`,
  );
  const by = Object.fromEntries(left.rows.map((r) => [r.consumer, r.n]));
  expect(by.short).toBeUndefined();
  expect(by.long).toBe(50 + liveCount);
});

it('purge validates its options', async () => {
  await expect(purge(db.pool, { schema: db.schema, batchSize: 0 })).rejects.toMatchObject({
    code: 'INVALID_OPTION',
    message: expect.stringMatching(/batchSize/),
  });
  await expect(purge(db.pool, { schema: 'x;drop' })).rejects.toMatchObject({ code: 'INVALID_IDENTIFIER' });
});

it('noteStart counts per consumer and id, commits on its own, and purge removes expired counts', async () => {
  const handler = async () => {};
  const a = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'starts-a',
    retentionMs: 1000,
    handler,
  });
  const b = createInbox({ pool: db.pool, schema: db.schema, consumer: 'starts-b', handler });
  const m = envelope('m-start', { attempt: 2, redelivered: true });
  expect(await a.noteStart(m)).toBe(1);
  expect(await a.noteStart(m)).toBe(2);
  expect(await b.noteStart(m)).toBe(1);
  await expect(a.noteStart({ ...m, id: undefined })).rejects.toThrow(/message id is missing/);
  await new Promise((r) => setTimeout(r, 1100));
  await purge(db.pool, { schema: db.schema });
  const { rows } = await db.pool.query(`SELECT consumer, starts FROM ${db.schema}.starts ORDER BY consumer`);
  expect(rows).toEqual([{ consumer: 'starts-b', starts: 1 }]);
  // A fresh count after the purge starts again at 1.
  expect(await a.noteStart(m)).toBe(1);
});
