import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LATEST_SCHEMA_VERSION, purge } from '../../src/admin/index.js';
import { createInbox, migrate } from '../../src/index.js';
import { migrateWith } from '../../src/schema/migrate.js';
import { MIGRATIONS } from '../../src/schema/migrations.js';
import { envelope, makePool } from './fixtures/db.js';

// Schema version 3 (lease) applied by migrate() to a database at version 2, with rows in it; and
// version 9 (steps-no-cascade) to one at version 8 with steps in it.

const pool = makePool(4);
const schema = `core_lease_migrate_${randomBytes(4).toString('hex')}`;
const at8 = `core_steps_migrate_${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  // A database as version 2 of @once/core left it.
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query(
    `CREATE TABLE ${schema}.schema_version (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
  );
  for (const m of MIGRATIONS.filter((m) => m.version <= 2)) {
    await pool.query(m.sql.replaceAll('{schema}', `"${schema}"`));
    await pool.query(`INSERT INTO ${schema}.schema_version (version, name) VALUES ($1, $2)`, [
      m.version,
      m.name,
    ]);
  }
  await pool.query(
    `INSERT INTO ${schema}.inbox (consumer, message_id, fingerprint, status, result, expires_at)
     VALUES ('c', 'old-done', sha256($1::bytea), 'done', '{"n":1}', now() + interval '1 day')`,
    [envelope('old-done').body],
  );
  await pool.query(
    `INSERT INTO ${schema}.inbox (consumer, message_id, fingerprint, status, error, body, attempts, expires_at)
     VALUES ('c', 'old-failed', sha256($1::bytea), 'failed', '{"message":"x"}', 'body', 3, now() + interval '1 day')`,
    [envelope('old-failed').body],
  );
});
afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
  await pool.query(`DROP SCHEMA IF EXISTS ${at8} CASCADE`).catch(() => {});
  await pool.end();
});

it('upgrades version 2 to the latest without losing rows, then lease mode works on it', async () => {
  expect(LATEST_SCHEMA_VERSION).toBeGreaterThanOrEqual(3);
  const res = await migrate(pool, { schema });
  expect(res).toMatchObject({ from: 2, to: LATEST_SCHEMA_VERSION });
  expect(await migrate(pool, { schema })).toMatchObject({ from: LATEST_SCHEMA_VERSION });

  const rows = await pool.query(
    `SELECT message_id, status, result, error, body, attempts, owner, lease_until FROM ${schema}.inbox ORDER BY message_id`,
  );
  expect(rows.rows).toEqual([
    {
      message_id: 'old-done',
      status: 'done',
      result: { n: 1 },
      error: null,
      body: null,
      attempts: 1,
      owner: null,
      lease_until: null,
    },
    {
      message_id: 'old-failed',
      status: 'failed',
      result: null,
      error: { message: 'x' },
      body: Buffer.from('body'),
      attempts: 3,
      owner: null,
      lease_until: null,
    },
  ]);
  // The status check was replaced, not dropped.
  await expect(
    pool.query(
      `INSERT INTO ${schema}.inbox (consumer, message_id, fingerprint, status, expires_at) VALUES ('c', 'x', '\\x00', 'bogus', now())`,
    ),
  ).rejects.toMatchObject({ code: '23514' });

  const inbox = createInbox({
    pool,
    schema,
    consumer: 'c',
    mode: 'lease',
    storeResult: true,
    handler: async (_e, ctx) => ctx.step('s', () => 'new'),
  });
  expect(await inbox.process(envelope('old-done', { redelivered: true }))).toMatchObject({
    status: 'duplicate',
    result: { n: 1 },
  });
  expect(await inbox.process(envelope('old-failed'))).toMatchObject({
    status: 'failed',
    reason: 'previously-failed',
  });
  expect(await inbox.process(envelope('new'))).toMatchObject({ status: 'processed', result: 'new' });
  // Steps go with their inbox row when it is purged.
  await pool.query(
    `UPDATE ${schema}.inbox SET expires_at = now() - interval '1 second' WHERE message_id = 'new'`,
  );
  expect(await purge(pool, { schema })).toBe(1);
  expect((await pool.query(`SELECT count(*)::int AS n FROM ${schema}.steps`)).rows[0].n).toBe(0);
});

it('upgrades version 8 to 9: the foreign key is dropped, every row kept; lease mode and purge go on with its steps', async () => {
  // A database as version 8 of @once/core left it: a done message with steps, a lease taken
  // over halfway (its first attempt recorded one step), a failed one with a step.
  expect(
    await migrateWith(
      pool,
      { schema: at8 },
      MIGRATIONS.filter((m) => m.version <= 8),
    ),
  ).toMatchObject({
    to: 8,
    compatibleFrom: 1,
  });
  const fingerprint = (id: string) => `sha256(convert_to('${JSON.stringify({ id, amount: 10 })}', 'UTF8'))`;
  await pool.query(
    `INSERT INTO ${at8}.inbox (consumer, message_id, fingerprint, status, owner, lease_until, attempts, expires_at) VALUES
      ('c', 'done', ${fingerprint('done')}, 'done', NULL, NULL, 1, now() + interval '1 day'),
      ('c', 'half', ${fingerprint('half')}, 'in_progress', 'dead-worker', now() - interval '1 second', 1, now() + interval '1 day'),
      ('c', 'bad', ${fingerprint('bad')}, 'failed', NULL, NULL, 2, now() + interval '1 day')`,
  );
  await pool.query(
    `INSERT INTO ${at8}.steps (consumer, message_id, step, seq, attempt, result) VALUES
      ('c', 'done', 'charge', 1, 1, '{"id": "ch_1"}'), ('c', 'done', 'mail', 2, 1, NULL),
      ('c', 'half', 'charge', 1, 1, '"ch_2"'), ('c', 'bad', 'charge', 1, 2, '"ch_3"')`,
  );
  const foreignKeys = async () =>
    (
      await pool.query(`SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'f'`, [
        `${at8}.steps`,
      ])
    ).rows.map((r) => r.conname);
  expect(await foreignKeys()).toEqual(['steps_consumer_message_id_fkey']);
  const snapshot = async () => ({
    inbox: (await pool.query(`SELECT * FROM ${at8}.inbox ORDER BY message_id`)).rows,
    steps: (await pool.query(`SELECT * FROM ${at8}.steps ORDER BY message_id, step`)).rows,
  });
  const before = await snapshot();
  expect(before.steps).toHaveLength(4);

  // To the latest version: the migrations after 9 (10, republish-mark; 11, inflight) are expands, so 9 stays the floor.
  expect(await migrate(pool, { schema: at8 })).toEqual({
    schema: at8,
    from: 8,
    to: LATEST_SCHEMA_VERSION,
    compatibleFrom: 9,
  });
  expect(await foreignKeys()).toEqual([]);
  // Every row kept as it was, with has_steps: true on each row older than the migration (it may
  // have steps), false on rows inserted after it until a step is recorded.
  const after = await snapshot();
  expect(after.steps).toEqual(before.steps);
  expect(after.inbox).toEqual(before.inbox.map((r) => ({ ...r, has_steps: true })));
  await pool.query(
    `INSERT INTO ${at8}.inbox (consumer, message_id, fingerprint, status, expires_at) VALUES ('c', 'later', '\\x00', 'done', now() + interval '1 day')`,
  );
  const later = await pool.query(`SELECT has_steps FROM ${at8}.inbox WHERE message_id = 'later'`);
  expect(later.rows).toEqual([{ has_steps: false }]);
  const version = await pool.query(
    `SELECT version, name, compatible_from, removes FROM ${at8}.schema_version WHERE version = 9`,
  );
  expect(version.rows).toEqual([
    {
      version: 9,
      name: 'steps-no-cascade',
      compatible_from: 9,
      removes:
        "the cascade from inbox to steps: purge and the admin deletes of older versions rely on it to remove a message's durable steps",
    },
  ]);

  // The half-done message is taken over and resumes after its recorded step.
  const ran: string[] = [];
  const inbox = createInbox({
    pool,
    schema: at8,
    consumer: 'c',
    mode: 'lease',
    storeResult: true,
    handler: async (_e, ctx) => {
      const charge = await ctx.step('charge', () => {
        ran.push('charge');
        return 'again';
      });
      await ctx.step('mail', () => void ran.push('mail'));
      return charge;
    },
  });
  expect(await inbox.process(envelope('half', { redelivered: true }))).toMatchObject({
    status: 'processed',
    result: 'ch_2',
  });
  expect(ran).toEqual(['mail']);
  // Purge takes the steps of what it deletes, and only those.
  await pool.query(
    `UPDATE ${at8}.inbox SET expires_at = now() - interval '1 second' WHERE message_id IN ('done', 'half')`,
  );
  expect(await purge(pool, { schema: at8 })).toBe(2);
  const left = await pool.query(`SELECT message_id, step FROM ${at8}.steps ORDER BY 1, 2`);
  expect(left.rows).toEqual([{ message_id: 'bad', step: 'charge' }]);
});
