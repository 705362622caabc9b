import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createInbox, LATEST_SCHEMA_VERSION, migrate, purge } from '../../src/index.js';
import { MIGRATIONS } from '../../src/migrations.js';
import { envelope, makePool } from './fixtures/db.js';

// Schema version 3 (lease) applied by migrate() to a database at version 2, with rows in it.

const pool = makePool(4);
const schema = `core_lease_migrate_${randomBytes(4).toString('hex')}`;

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
