import { afterAll, beforeAll, expect, it } from 'vitest';
import { createInbox, purge } from '../../src/index.js';
import { envelope, freshDb, makePool } from './fixtures/db.js';

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

it('purge at a rowsPerSecond deletes every expired row and no live one, and stops when aborted', async () => {
  const insert = (consumer: string, n: number, expires: string) =>
    db.pool.query(
      `INSERT INTO ${db.schema}.inbox (consumer, message_id, fingerprint, status, expires_at)
       SELECT $1, 'r' || g, '\\x00', 'done', ${expires} FROM generate_series(1, $2::int) AS g`,
      [consumer, n],
    );
  await insert('paced-old', 600, "now() - interval '1 hour'");
  await insert('paced-live', 300, "now() + interval '1 hour'");
  const count = async (consumer: string) =>
    (await db.pool.query(`SELECT count(*)::int AS n FROM ${db.schema}.inbox WHERE consumer = $1`, [consumer]))
      .rows[0].n;

  const progress: number[] = [];
  const n = await purge(db.pool, {
    schema: db.schema,
    batchSize: 100,
    rowsPerSecond: 2000,
    onProgress: (d) => progress.push(d),
  });
  expect(n).toBe(600);
  expect(progress).toEqual([100, 200, 300, 400, 500, 600]);
  expect(await count('paced-old')).toBe(0);
  expect(await count('paced-live')).toBe(300);

  // A slow rate: an abort during the wait after the first batch ends the run with that batch.
  await insert('paced-old', 400, "now() - interval '1 hour'");
  const stop = new AbortController();
  const first = await purge(db.pool, {
    schema: db.schema,
    batchSize: 50,
    rowsPerSecond: 1,
    signal: stop.signal,
    onProgress: () => setTimeout(() => stop.abort(), 20),
  });
  expect(first).toBe(50);
  expect(await count('paced-old')).toBe(350);
  expect(await count('paced-live')).toBe(300);
  await db.pool.query(`DELETE FROM ${db.schema}.inbox WHERE consumer LIKE 'paced-%'`);
  // A guard against a hang, not a timing assertion: without the abort the wait would be 50 s.
}, 30_000);

it('purge validates its options', async () => {
  await expect(purge(db.pool, { schema: db.schema, batchSize: 0 })).rejects.toMatchObject({
    code: 'INVALID_OPTION',
    message: expect.stringMatching(/batchSize/),
  });
  await expect(purge(db.pool, { schema: db.schema, rowsPerSecond: 0 })).rejects.toMatchObject({
    code: 'INVALID_OPTION',
    message: expect.stringMatching(/rowsPerSecond/),
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

it("purge's asynchronous commit stays in its own steps: the pooled session keeps synchronous_commit on", async () => {
  const insert = (n: number) =>
    db.pool.query(
      `INSERT INTO ${db.schema}.inbox (consumer, message_id, fingerprint, status, expires_at)
       SELECT 'async-old', 'r' || g, '\\x00', 'done', now() - interval '1 hour' FROM generate_series(1, $1::int) AS g`,
      [n],
    );
  await insert(30);
  // One connection: the purge's steps and the checks below share its session.
  const one = makePool(1);
  try {
    const setting = async () => (await one.query('SHOW synchronous_commit')).rows[0].synchronous_commit;
    expect(await setting()).toBe('on');
    expect(await purge(one, { schema: db.schema, batchSize: 10, maxRows: 12 })).toBe(12);
    expect(await setting()).toBe('on');
    expect(await purge(one, { schema: db.schema, batchSize: 7 })).toBe(18);
    expect(await setting()).toBe('on');
    // A message processed on the same session after a purge still commits flushed: the claim pins it.
    const inbox = createInbox({
      pool: one,
      schema: db.schema,
      consumer: 'async-live',
      handler: async () => {},
    });
    expect((await inbox.process(envelope('after-purge'))).status).toBe('processed');
    expect(await setting()).toBe('on');
  } finally {
    await one.end();
  }
});
