import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import {
  checkSchema,
  LATEST_SCHEMA_VERSION,
  purge,
  readSchemaState,
  schemaSql,
} from '../../src/admin/index.js';
import { createInbox, type Handler, migrate } from '../../src/index.js';
import { migrateWith } from '../../src/schema/migrate.js';
import { compatibleFrom, MIGRATIONS, type Migration } from '../../src/schema/migrations.js';
import { judgeSchema } from '../../src/schema/schema-compat.js';
import { envelope, faultyPool, makePool } from './fixtures/db.js';

// Expand/contract (docs/upgrades.md), in one process: migrateWith() with a longer list stands for
// a newer build's migrate(); the checks under test are this build's. test/integration/
// rolling-upgrade.test.ts runs the same against separately built copies of @once/core.

const pool = makePool(4);
const schemas: string[] = [];
function fresh(prefix: string): string {
  const s = `${prefix}_${randomBytes(4).toString('hex')}`;
  schemas.push(s);
  return s;
}
afterAll(async () => {
  for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`).catch(() => {});
  await pool.end();
});

const V = LATEST_SCHEMA_VERSION;
// The oldest code that runs on this build's schema: 9, since migration 9 (steps-no-cascade) contracted.
const FROM = compatibleFrom(MIGRATIONS, V);
// What a next release might add: a nullable column (expand), then a narrower check (contract).
const EXPAND: Migration = {
  version: V + 1,
  name: 'inbox-note',
  change: 'expand',
  sql: 'ALTER TABLE {schema}.inbox ADD COLUMN note text;',
};
const CONTRACT: Migration = {
  version: V + 2,
  name: 'short-ids',
  change: 'contract',
  removes: 'message ids longer than 256 characters (inbox.message_id is checked)',
  sql: 'ALTER TABLE {schema}.inbox ADD CONSTRAINT inbox_short_ids CHECK (length(message_id) <= 256);',
};

const handler: Handler = async () => ({ ok: true });

async function versionRows(schema: string) {
  const { rows } = await pool.query(
    `SELECT version, name, compatible_from, removes FROM ${schema}.schema_version ORDER BY version`,
  );
  return rows;
}

describe('a version table written by a release before the compatibility columns', () => {
  it('migrate() adds them and fills the rows it knows, changing no version', async () => {
    const schema = fresh('compat_old');
    await pool.query(`CREATE SCHEMA ${schema}`);
    await pool.query(
      `CREATE TABLE ${schema}.schema_version (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    for (const m of MIGRATIONS) {
      await pool.query(m.sql.replaceAll('{schema}', schema));
      await pool.query(`INSERT INTO ${schema}.schema_version (version, name) VALUES ($1, $2)`, [
        m.version,
        m.name,
      ]);
    }
    await checkSchema(pool, schema); // this build runs on it before any migrate()
    expect(await migrate(pool, { schema })).toEqual({ schema, from: V, to: V, compatibleFrom: FROM });
    expect(await versionRows(schema)).toEqual(
      MIGRATIONS.map((m) => ({
        version: m.version,
        name: m.name,
        compatible_from: compatibleFrom(MIGRATIONS, m.version),
        removes: m.change === 'contract' ? m.removes : null,
      })),
    );
  });

  it('a migrate() with nothing to do alters no table', async () => {
    const schema = fresh('compat_idle');
    await migrate(pool, { schema });
    const seen: string[] = [];
    // Records every statement, of migrate()'s client and of the pool, and lets it through.
    const recording = {
      ...faultyPool(pool, ({ text }) => {
        seen.push(text);
        return undefined;
      }),
      query: (text: string, values?: unknown[]) => {
        seen.push(text);
        return pool.query(text, values);
      },
    } as typeof pool;
    await migrate(recording, { schema });
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((s) => /ALTER\s+TABLE/i.test(s))).toEqual([]);
  });
});

describe('a newer schema that only expanded', () => {
  it('this build runs on it: checkSchema, an inbox, migrate() leaves it as it is', async () => {
    const schema = fresh('compat_expand');
    expect(await migrateWith(pool, { schema }, [...MIGRATIONS, EXPAND])).toMatchObject({
      from: 0,
      to: V + 1,
      compatibleFrom: FROM,
    });
    await checkSchema(pool, schema);
    const inbox = createInbox({ pool, schema, consumer: 'c', handler });
    await inbox.ready();
    expect(await inbox.process(envelope('e1'))).toMatchObject({ status: 'processed' });
    expect(await inbox.process(envelope('e1'))).toMatchObject({ status: 'duplicate' });
    expect(await migrate(pool, { schema })).toEqual({ schema, from: V + 1, to: V + 1, compatibleFrom: FROM });
    expect(await readSchemaState(pool, schema)).toEqual({
      schema,
      version: V + 1,
      latestVersion: V,
      status: 'ahead',
      compatibleFrom: FROM,
      tooNew: null,
    });
    expect((await versionRows(schema)).at(-1)).toEqual({
      version: V + 1,
      name: 'inbox-note',
      compatible_from: FROM,
      removes: null,
    });
  });

  it('a contract that removes only what this build no longer uses leaves it running', async () => {
    const schema = fresh('compat_late');
    const gentle: Migration = { ...CONTRACT, compatibleFrom: V };
    await migrateWith(pool, { schema }, [...MIGRATIONS, EXPAND, gentle]);
    await checkSchema(pool, schema);
    expect(await readSchemaState(pool, schema)).toMatchObject({ status: 'ahead', compatibleFrom: V });
  });
});

describe('a newer schema whose contract migration removed what this build uses', () => {
  it('is refused by checkSchema, the inbox and migrate(), saying which version removed what', async () => {
    const schema = fresh('compat_contract');
    expect(await migrateWith(pool, { schema }, [...MIGRATIONS, EXPAND, CONTRACT])).toMatchObject({
      to: V + 2,
      compatibleFrom: V + 2,
    });
    const message =
      `schema ${schema} is at version ${V + 2}, and version ${V + 2} (short-ids) removed message ids longer than 256 ` +
      `characters (inbox.message_id is checked): it runs code of schema version ${V + 2} or later; ` +
      `this @once/core is at schema version ${V}: upgrade @once/core`;
    await expect(checkSchema(pool, schema)).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW', message });
    const inbox = createInbox({ pool, schema, consumer: 'c', handler });
    await expect(inbox.ready()).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW', message });
    expect(await inbox.process(envelope('c1'))).toMatchObject({
      status: 'not-run',
      why: 'unavailable',
      error: { code: 'SCHEMA_TOO_NEW' },
    });
    await expect(migrate(pool, { schema })).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW', message });
    // A purge job of this build is refused too, before it deletes anything.
    await expect(purge(pool, { schema })).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW', message });
    expect(await readSchemaState(pool, schema)).toMatchObject({ status: 'too-new', compatibleFrom: V + 2 });
    // The newer build itself runs on it.
    expect(await migrateWith(pool, { schema }, [...MIGRATIONS, EXPAND, CONTRACT])).toMatchObject({
      from: V + 2,
      to: V + 2,
    });
  });
});

describe("this build's own contract: migration 9 drops the cascade from inbox to steps", () => {
  it('compatible from 9: code of schema 8 or 7 is refused, saying what version 9 removed', async () => {
    const schema = fresh('compat_nine');
    expect(await migrate(pool, { schema })).toMatchObject({ to: V, compatibleFrom: 9 });
    const nine = MIGRATIONS.find((m) => m.version === 9);
    expect(nine).toMatchObject({ name: 'steps-no-cascade', change: 'contract', compatibleFrom: 9 });
    const removes =
      "the cascade from inbox to steps: purge and the admin deletes of older versions rely on it to remove a message's durable steps";
    // A build of schema version 8 (or 7) judges it: its migrations are this list up to there.
    for (const older of [8, 7]) {
      const build = MIGRATIONS.filter((m) => m.version <= older);
      expect(await judgeSchema(pool, schema, schema, V, build)).toEqual({
        status: 'too-new',
        compatibleFrom: 9,
        tooNew: `schema ${schema} is at version ${V}, and version 9 (steps-no-cascade) removed ${removes}: it runs code of schema version 9 or later`,
      });
    }
    // This build runs on it, and so does a later one that only expands.
    expect(await judgeSchema(pool, schema, schema, V)).toMatchObject({
      status: 'current',
      compatibleFrom: 9,
    });
    await migrateWith(pool, { schema }, [...MIGRATIONS, EXPAND]);
    expect(await judgeSchema(pool, schema, schema, V + 1)).toMatchObject({
      status: 'ahead',
      compatibleFrom: 9,
    });
    const { rows } = await pool.query(
      `SELECT compatible_from, removes FROM ${schema}.schema_version WHERE version = 9`,
    );
    expect(rows).toEqual([{ compatible_from: 9, removes }]);
  });
});

describe('schemaSql()', () => {
  it('writes the same version rows as migrate(), and upgrades an older version table', async () => {
    const byScript = fresh('compat_sql');
    const byMigrate = fresh('compat_sql_m');
    await pool.query(schemaSql({ schema: byScript }));
    await migrate(pool, { schema: byMigrate });
    expect(await versionRows(byScript)).toEqual(await versionRows(byMigrate));
    // Applied again over a version table without the columns (a release before them).
    const older = fresh('compat_sql_old');
    await pool.query(`CREATE SCHEMA ${older}`);
    await pool.query(
      `CREATE TABLE ${older}.schema_version (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    await pool.query(schemaSql({ schema: older }));
    await checkSchema(pool, older);
  });
});
