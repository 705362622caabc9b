import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { purge } from '../../src/admin/index.js';
import { createInbox } from '../../src/index.js';
import { migrateWith } from '../../src/schema/migrate.js';
import { MIGRATIONS } from '../../src/schema/migrations.js';
import { envelope, makePool } from './fixtures/db.js';

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

it('purge checks the schema first: one not installed, or behind this build, is refused and nothing is deleted', async () => {
  await expect(purge(db.pool, { schema: `${db.schema}_none` })).rejects.toMatchObject({
    code: 'SCHEMA_NOT_INSTALLED',
    message: expect.stringContaining(`schema ${db.schema}_none is not installed`),
  });
  // A schema at version 8, as @once/core of that version left it, with one expired row: this
  // build's purge (which deletes steps itself, since 9 dropped the cascade) does not run on it.
  const at8 = `${db.schema}_at8`;
  await migrateWith(
    db.pool,
    { schema: at8 },
    MIGRATIONS.filter((m) => m.version <= 8),
  );
  try {
    await db.pool.query(
      `INSERT INTO ${at8}.inbox (consumer, message_id, fingerprint, status, expires_at) VALUES ('c', 'old', '\\x00', 'done', now() - interval '1 day')`,
    );
    await expect(purge(db.pool, { schema: at8 })).rejects.toMatchObject({
      code: 'SCHEMA_NOT_INSTALLED',
      message: expect.stringContaining(`schema ${at8} is at version 8`),
    });
    const left = await db.pool.query(`SELECT count(*)::int AS n FROM ${at8}.inbox`);
    expect(left.rows[0].n).toBe(1);
  } finally {
    await db.pool.query(`DROP SCHEMA ${at8} CASCADE`);
  }
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
  // This count expires a second from now: left in the shared schema, a later test's purge would
  // count it among its rows, or not, depending on how long the tests between took.
  await db.pool.query(`DELETE FROM ${db.schema}.starts`);
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

it("purge deletes the durable steps of the rows it deletes, in the same statement, and keeps the others'", async () => {
  // From schema version 9 no foreign key cascades from inbox to steps: the purge statement itself
  // takes the steps (migration 9).
  const keys = await db.pool.query(
    `SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'f'`,
    [`${db.schema}.steps`],
  );
  expect(keys.rows).toEqual([]);
  await purge(db.pool, { schema: db.schema }); // what earlier tests left expired
  // Ids 1..n; `expires` may use g, the id's number.
  const rows = (consumer: string, n: number, expires: string) =>
    db.pool.query(
      `INSERT INTO ${db.schema}.inbox (consumer, message_id, fingerprint, status, expires_at)
       SELECT $1, 'm' || g, '\\x00', 'done', ${expires} FROM generate_series(1, $2::int) AS g`,
      [consumer, n],
    );
  // Two steps for every third id of `consumer`, of ids 1..n, the row marked as lease mode's step
  // record marks it.
  const steps = async (consumer: string, n: number) => {
    await db.pool.query(
      `INSERT INTO ${db.schema}.steps (consumer, message_id, step, seq, attempt)
       SELECT $1, 'm' || g, s, 1, 1 FROM generate_series(1, $2::int) AS g, unnest(ARRAY['charge', 'mail']) AS s
       WHERE g % 3 = 0`,
      [consumer, n],
    );
    await db.pool.query(
      `UPDATE ${db.schema}.inbox SET has_steps = true
       WHERE consumer = $1 AND message_id IN (SELECT message_id FROM ${db.schema}.steps WHERE consumer = $1)`,
      [consumer],
    );
  };
  // Expired in id order, so each batch of 100 takes the next 100 ids.
  await rows('steps-old', 250, "now() - interval '1 hour' + g * interval '1 millisecond'");
  await rows('steps-live', 40, "now() + interval '1 hour'");
  await steps('steps-old', 250);
  await steps('steps-live', 40);
  // Steps with no inbox row: not of a row this purge deletes, so not its to delete.
  await db.pool.query(
    `INSERT INTO ${db.schema}.steps (consumer, message_id, step, seq, attempt) VALUES ('steps-old', 'ghost', 'charge', 1, 1)`,
  );
  const left = async () =>
    (
      await db.pool.query(
        `SELECT consumer, count(*)::int AS n FROM ${db.schema}.steps WHERE consumer LIKE 'steps-%' GROUP BY consumer ORDER BY consumer`,
      )
    ).rows;
  expect(await left()).toEqual([
    { consumer: 'steps-live', n: 26 },
    { consumer: 'steps-old', n: 167 },
  ]);

  // A statement that fails deleting a step deletes no inbox row either: one statement, one
  // transaction. A trigger refuses the steps of m150 (in the second batch of 100).
  await db.pool.query(`CREATE FUNCTION ${db.schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF OLD.message_id = 'm150' THEN RAISE EXCEPTION 'refused'; END IF; RETURN OLD; END $$`);
  await db.pool.query(
    `CREATE TRIGGER refuse BEFORE DELETE ON ${db.schema}.steps FOR EACH ROW EXECUTE FUNCTION ${db.schema}.refuse()`,
  );
  const progress: number[] = [];
  await expect(
    purge(db.pool, { schema: db.schema, batchSize: 100, onProgress: (d) => progress.push(d) }),
  ).rejects.toThrow(/refused/);
  expect(progress).toEqual([100]);
  const old = await db.pool.query<{ message_id: string }>(
    `SELECT message_id FROM ${db.schema}.inbox WHERE consumer = 'steps-old'`,
  );
  expect(old.rows).toHaveLength(150);
  expect(old.rows.map((r) => r.message_id)).toContain('m150');
  expect(await left()).toEqual([
    { consumer: 'steps-live', n: 26 },
    // 33 ids of the first 100 had two steps each.
    { consumer: 'steps-old', n: 167 - 66 },
  ]);

  await db.pool.query(`DROP TRIGGER refuse ON ${db.schema}.steps`);
  expect(await purge(db.pool, { schema: db.schema, batchSize: 100 })).toBe(150);
  expect(await left()).toEqual([
    { consumer: 'steps-live', n: 26 },
    { consumer: 'steps-old', n: 1 },
  ]);
  const ghost = await db.pool.query(`SELECT message_id FROM ${db.schema}.steps WHERE consumer = 'steps-old'`);
  expect(ghost.rows).toEqual([{ message_id: 'ghost' }]);
});
