import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CoreBuild,
  coreAtCommit,
  coreWithMigrations,
  createTestPool,
  dropSchema,
  type ExtraMigration,
  freshSchemaName,
  quoteIdent,
} from '../support/index.js';

// Rolling upgrades across separately built copies of @once/core (docs/upgrades.md), each compiled
// into .cache/core-builds/ by test/support/core-builds.ts and loaded side by side:
//   before  @once/core as of PRE_RULE, the last commit before expand/contract: it refuses any
//           schema newer than its own (version 7);
//   release @once/core as of RULE, the first release with the rule (version 7);
//   next    this tree as built: the next release, whose migration 8 (http-responses) expands;
//   after   this tree plus a contract migration 9 that only code of version 8 or later runs on
//           (it narrows what the inbox accepts).
// Every consumer is a real inbox on one PostgreSQL schema, as a fleet mid-deploy has them.

const PRE_RULE = 'd4836de5219a2a0a93cfb536ec76651d9099567f';
// The last commit at schema version 7, with the rule: the release before migration 8.
const RULE = '9a411d468ea4d1001223ecd4e9e1324522eec393';
const CONTRACT: ExtraMigration = {
  version: 9,
  name: 'short-ids',
  change: 'contract',
  removes: 'message ids longer than 256 characters',
  compatibleFrom: 8,
  sql: 'ALTER TABLE {schema}.inbox ADD CONSTRAINT inbox_short_ids CHECK (length(message_id) <= 256);',
};

const pool = createTestPool({ max: 6 });
let before: CoreBuild;
let release: CoreBuild;
let next: CoreBuild;
let after: CoreBuild;

beforeAll(async () => {
  // One at a time: four tsc runs side by side would crowd a small machine.
  before = await coreAtCommit(PRE_RULE);
  release = await coreAtCommit(RULE);
  next = await coreWithMigrations('next', []);
  after = await coreWithMigrations('after-contract', [CONTRACT]);
  // About 20 s of CPU from a cold .cache (four tsc runs), nothing when cached; generous for a busy machine.
}, 300_000);

const schemas: string[] = [];
async function freshSchema(prefix: string): Promise<string> {
  const schema = freshSchemaName(prefix);
  schemas.push(schema);
  return schema;
}
afterAll(async () => {
  for (const s of schemas) await dropSchema(pool, s);
  await pool.end();
});

/** An effects table: one row per handler run that committed. */
async function effectsTable(schema: string): Promise<string> {
  const table = `${quoteIdent(schema)}.effects`;
  await pool.query(`CREATE SCHEMA ${quoteIdent(schema)}`);
  await pool.query(`CREATE TABLE ${table} (id text NOT NULL, by text NOT NULL)`);
  return table;
}

/** A consumer started from `core` (a process of that release), writing its effect in the transaction. */
function consumer(core: CoreBuild, schema: string, effects: string, by: string) {
  return core.createInbox({
    pool,
    schema,
    consumer: 'orders',
    logger: false,
    handler: async (e, { tx }) => {
      await tx.query(`INSERT INTO ${effects} (id, by) VALUES ($1, $2)`, [e.id, by]);
    },
  });
}

function envelope(id: string) {
  return {
    id,
    body: Buffer.from(JSON.stringify({ id })),
    headers: {},
    source: { broker: 'test', queue: 'orders' },
    attempt: 1,
    redelivered: false,
  };
}

async function effects(table: string): Promise<Record<string, string[]>> {
  const { rows } = await pool.query<{ id: string; by: string }>(
    `SELECT id, by FROM ${table} ORDER BY id, by`,
  );
  const out: Record<string, string[]> = {};
  for (const r of rows) out[r.id] = [...(out[r.id] ?? []), r.by];
  return out;
}

it('the copies are what they stand for', () => {
  expect([before, release, next, after].map((c) => c.LATEST_SCHEMA_VERSION)).toEqual([7, 7, 8, 9]);
  expect('migrate' in before && !('change' in (before.MIGRATIONS[0] ?? {}))).toBe(true);
  expect(release.MIGRATIONS.map((m) => m.change)).toEqual(Array(7).fill('expand'));
});

describe('expand, then contract, one schema, a fleet mid-deploy', () => {
  it('release runs on the next schema (expand) and refuses the one after (contract) with what removed what', async () => {
    const schema = await freshSchema('roll');
    const table = await effectsTable(schema);
    await release.migrate(pool, { schema });
    const r1 = consumer(release, schema, table, 'r1');
    await r1.ready();
    expect(await r1.process(envelope('m1'))).toMatchObject({ status: 'processed' });

    // Expand: the next release migrates first; this release's consumers keep running ...
    expect(await next.migrate(pool, { schema })).toMatchObject({ from: 7, to: 8, compatibleFrom: 1 });
    expect(await r1.process(envelope('m2'))).toMatchObject({ status: 'processed' });
    // ... one of them that restarts now starts (before this rule: SCHEMA_TOO_NEW) ...
    const r2 = consumer(release, schema, table, 'r2');
    await r2.ready();
    expect(await r2.process(envelope('m3'))).toMatchObject({ status: 'processed' });
    // ... and its migrate() at start leaves the newer schema as it is.
    expect(await release.migrate(pool, { schema })).toEqual({ schema, from: 8, to: 8, compatibleFrom: 1 });
    // The next release's consumers share the inbox with them: no id runs twice.
    const n1 = consumer(next, schema, table, 'n1');
    await n1.ready();
    expect(await n1.process(envelope('m1'))).toMatchObject({ status: 'duplicate' });
    expect(await n1.process(envelope('m4'))).toMatchObject({ status: 'processed' });
    expect(await r2.process(envelope('m4'))).toMatchObject({ status: 'duplicate' });

    // Contract (compatible from 8): once every consumer runs 8, the release after migrates.
    expect(await after.migrate(pool, { schema })).toMatchObject({ from: 8, to: 9, compatibleFrom: 8 });
    expect(await n1.process(envelope('m5'))).toMatchObject({ status: 'processed' });
    const n2 = consumer(next, schema, table, 'n2');
    await n2.ready(); // a restart of version 8 still starts
    // Version 7 may not start on it, and says which migration removed what.
    const message =
      `schema ${schema} is at version 9, and version 9 (short-ids) removed message ids longer than 256 characters: ` +
      'it runs code of schema version 8 or later; this @once/core is at schema version 7: upgrade @once/core';
    const r3 = consumer(release, schema, table, 'r3');
    await expect(r3.ready()).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW', message });
    expect(await r3.process(envelope('m6'))).toMatchObject({ status: 'not-run', why: 'unavailable' });
    await expect(release.migrate(pool, { schema })).rejects.toMatchObject({
      code: 'SCHEMA_TOO_NEW',
      message,
    });
    const a1 = consumer(after, schema, table, 'a1');
    expect(await a1.process(envelope('m5'))).toMatchObject({ status: 'duplicate' });
    expect(await a1.process(envelope('m6'))).toMatchObject({ status: 'processed' });

    expect(await effects(table)).toEqual({
      m1: ['r1'],
      m2: ['r1'],
      m3: ['r2'],
      m4: ['n1'],
      m5: ['n1'],
      m6: ['a1'],
    });
  });
});

describe('a release before this rule', () => {
  it('runs on the schema this release migrated, and beside it while that migrate() runs', async () => {
    const schema = await freshSchema('roll_before');
    const table = await effectsTable(schema);
    await before.migrate(pool, { schema });
    const b1 = consumer(before, schema, table, 'b1');
    expect(await b1.process(envelope('m1'))).toMatchObject({ status: 'processed' });
    // This release adds the compatibility columns to the version table, at the same version.
    expect(await release.migrate(pool, { schema })).toEqual({ schema, from: 7, to: 7, compatibleFrom: 1 });
    expect(await b1.process(envelope('m2'))).toMatchObject({ status: 'processed' });
    const b2 = consumer(before, schema, table, 'b2');
    await b2.ready();
    expect(await b2.process(envelope('m1'))).toMatchObject({ status: 'duplicate' });
    expect(await before.migrate(pool, { schema })).toEqual({ schema, from: 7, to: 7 });
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM ${quoteIdent(schema)}.schema_version WHERE compatible_from = 1`,
    );
    expect(rows[0].n).toBe(7);
  });

  it('refuses any newer schema, even one that only expanded: the first release with the rule is the first that tolerates one', async () => {
    const schema = await freshSchema('roll_before_next');
    const table = await effectsTable(schema);
    await next.migrate(pool, { schema });
    const b1 = consumer(before, schema, table, 'b1');
    await expect(b1.ready()).rejects.toMatchObject({
      code: 'SCHEMA_TOO_NEW',
      message: `schema ${schema} is at version 8, newer than this @once/core understands (7): upgrade @once/core`,
    });
  });
});
