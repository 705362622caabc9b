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
//   eight   @once/core as of EIGHT, the last commit at version 8 (http-responses, an expand);
//   nine    @once/core as of NINE, the last commit at version 9: 9 (steps-no-cascade) contracts
//           with no rolling path (compatible from 9: code of 8 or earlier relies on the cascade
//           it drops);
//   current this tree as built: version 11 (10 republish-mark and 11 inflight, two expands that
//           9 runs on);
//   after   this tree plus a contract migration 12 that code of version 9 or later runs on (it
//           narrows what the inbox accepts): a contract with a rolling path.
// Every consumer is a real inbox on one PostgreSQL schema, as a fleet mid-deploy has them.

const PRE_RULE = 'd4836de5219a2a0a93cfb536ec76651d9099567f';
// The last commit at schema version 7, with the rule: the release before migration 8.
const RULE = '9a411d468ea4d1001223ecd4e9e1324522eec393';
// The last commit at schema version 8: the release before migration 9.
const EIGHT = 'c5504161aa11d3e36c064259d4d69469e92941b6';
// The last commit at schema version 9: the release before migration 10.
const NINE = '72da53676d84a3176120b1049e508cf22da0b3e4';
const CONTRACT: ExtraMigration = {
  version: 12,
  name: 'short-ids',
  change: 'contract',
  removes: 'message ids longer than 256 characters',
  compatibleFrom: 9,
  sql: 'ALTER TABLE {schema}.inbox ADD CONSTRAINT inbox_short_ids CHECK (length(message_id) <= 256);',
};
const NINE_REMOVES =
  "the cascade from inbox to steps: purge and the admin deletes of older versions rely on it to remove a message's durable steps";

const pool = createTestPool({ max: 6 });
let before: CoreBuild;
let release: CoreBuild;
let eight: CoreBuild;
let nine: CoreBuild;
let current: CoreBuild;
let after: CoreBuild;

beforeAll(async () => {
  // One at a time: five tsc runs side by side would crowd a small machine.
  before = await coreAtCommit(PRE_RULE);
  release = await coreAtCommit(RULE);
  eight = await coreAtCommit(EIGHT);
  nine = await coreAtCommit(NINE);
  current = await coreWithMigrations('current', []);
  after = await coreWithMigrations('after-contract', [CONTRACT]);
  // About 30 s of CPU from a cold .cache (six tsc runs), nothing when cached; seven minutes on a
  // machine shared with other CPU-bound work: generous.
}, 600_000);

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

/** The refusal of code of schema version `version` on a schema whose first cut above it is migration 9. */
const refusal = (schema: string, at: number, version: number) =>
  `schema ${schema} is at version ${at}, and version 9 (steps-no-cascade) removed ${NINE_REMOVES}: ` +
  `it runs code of schema version 9 or later; this @once/core is at schema version ${version}: upgrade @once/core`;

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
  expect([before, release, eight, nine, current, after].map((c) => c.LATEST_SCHEMA_VERSION)).toEqual([
    7, 7, 8, 9, 11, 12,
  ]);
  expect('migrate' in before && !('change' in (before.MIGRATIONS[0] ?? {}))).toBe(true);
  expect(release.MIGRATIONS.map((m) => m.change)).toEqual(Array(7).fill('expand'));
  expect(eight.MIGRATIONS.map((m) => m.change)).toEqual(Array(8).fill('expand'));
  expect(nine.MIGRATIONS.map((m) => m.change)).toEqual([...Array(8).fill('expand'), 'contract']);
  expect(current.MIGRATIONS.map((m) => m.change)).toEqual([
    ...Array(8).fill('expand'),
    'contract',
    'expand',
    'expand',
  ]);
  expect(current.compatibleFrom(current.MIGRATIONS, 9)).toBe(9);
  expect(current.compatibleFrom(current.MIGRATIONS, 10)).toBe(9);
  expect(current.compatibleFrom(current.MIGRATIONS, 11)).toBe(9);
});

describe('expand, then contract without and with a rolling path, one schema, a fleet mid-deploy', () => {
  it('7 runs on 8 (expand); 9 refuses 8 and 7, saying what it removed; 9 runs on 11 (10 and 11 expand); 12 (compatible from 9) keeps 9 and 11 running', async () => {
    const schema = await freshSchema('roll');
    const table = await effectsTable(schema);
    await release.migrate(pool, { schema });
    const r1 = consumer(release, schema, table, 'r1');
    await r1.ready();
    expect(await r1.process(envelope('m1'))).toMatchObject({ status: 'processed' });

    // Expand: version 8 migrates first; the consumers of 7 keep running ...
    expect(await eight.migrate(pool, { schema })).toMatchObject({ from: 7, to: 8, compatibleFrom: 1 });
    expect(await r1.process(envelope('m2'))).toMatchObject({ status: 'processed' });
    // ... one of them that restarts now starts (before the rule: SCHEMA_TOO_NEW) ...
    const r2 = consumer(release, schema, table, 'r2');
    await r2.ready();
    expect(await r2.process(envelope('m3'))).toMatchObject({ status: 'processed' });
    // ... and its migrate() at start leaves the newer schema as it is.
    expect(await release.migrate(pool, { schema })).toEqual({ schema, from: 8, to: 8, compatibleFrom: 1 });
    // The consumers of 8 share the inbox with them: no id runs twice.
    const e1 = consumer(eight, schema, table, 'e1');
    await e1.ready();
    expect(await e1.process(envelope('m1'))).toMatchObject({ status: 'duplicate' });
    expect(await e1.process(envelope('m4'))).toMatchObject({ status: 'processed' });
    expect(await r2.process(envelope('m4'))).toMatchObject({ status: 'duplicate' });

    // Contract, compatible from its own version: no rolling path. The consumers of 7 and 8 are
    // stopped, 9 migrates, and no process older than 9 starts again.
    expect(await nine.migrate(pool, { schema })).toMatchObject({ from: 8, to: 9, compatibleFrom: 9 });
    const e2 = consumer(eight, schema, table, 'e2');
    await expect(e2.ready()).rejects.toMatchObject({
      code: 'SCHEMA_TOO_NEW',
      message: refusal(schema, 9, 8),
    });
    expect(await e2.process(envelope('m5'))).toMatchObject({ status: 'not-run', why: 'unavailable' });
    await expect(eight.migrate(pool, { schema })).rejects.toMatchObject({
      code: 'SCHEMA_TOO_NEW',
      message: refusal(schema, 9, 8),
    });
    const r3 = consumer(release, schema, table, 'r3');
    await expect(r3.ready()).rejects.toMatchObject({
      code: 'SCHEMA_TOO_NEW',
      message: refusal(schema, 9, 7),
    });
    const n1 = consumer(nine, schema, table, 'n1');
    await n1.ready();
    expect(await n1.process(envelope('m4'))).toMatchObject({ status: 'duplicate' });
    expect(await n1.process(envelope('m5'))).toMatchObject({ status: 'processed' });

    // Expand again: 11 migrates first, the consumers of 9 keep running and restarting.
    expect(await current.migrate(pool, { schema })).toMatchObject({ from: 9, to: 11, compatibleFrom: 9 });
    expect(await n1.process(envelope('m6'))).toMatchObject({ status: 'processed' });
    const n2 = consumer(nine, schema, table, 'n2');
    await n2.ready();
    expect(await n2.process(envelope('m6'))).toMatchObject({ status: 'duplicate' });
    expect(await nine.migrate(pool, { schema })).toEqual({ schema, from: 11, to: 11, compatibleFrom: 9 });
    const c1 = consumer(current, schema, table, 'c1');
    await c1.ready();
    expect(await c1.process(envelope('m5'))).toMatchObject({ status: 'duplicate' });
    expect(await c1.process(envelope('m7'))).toMatchObject({ status: 'processed' });
    // 11's table (the Kafka replay marker as a row) is there for the consumers of 11 beside 9's.
    await c1.noteInflight('orders', 0, '41');
    expect(await c1.inflightEnd('orders', 0)).toBe('41');

    // Contract compatible from 9: once every consumer runs 9 or later, the release after migrates.
    expect(await after.migrate(pool, { schema })).toMatchObject({ from: 11, to: 12, compatibleFrom: 9 });
    expect(await c1.process(envelope('m8'))).toMatchObject({ status: 'processed' });
    const n3 = consumer(nine, schema, table, 'n3');
    await n3.ready(); // a restart of version 9 still starts
    expect(await n3.process(envelope('m8'))).toMatchObject({ status: 'duplicate' });
    expect(await current.migrate(pool, { schema })).toEqual({ schema, from: 12, to: 12, compatibleFrom: 9 });
    // Version 8 still may not start: the first migration that left it behind is 9.
    const e3 = consumer(eight, schema, table, 'e3');
    await expect(e3.ready()).rejects.toMatchObject({
      code: 'SCHEMA_TOO_NEW',
      message: refusal(schema, 12, 8),
    });
    const a1 = consumer(after, schema, table, 'a1');
    expect(await a1.process(envelope('m8'))).toMatchObject({ status: 'duplicate' });
    expect(await a1.process(envelope('m9'))).toMatchObject({ status: 'processed' });
    expect(await a1.inflightEnd('orders', 0)).toBe('41');

    expect(await effects(table)).toEqual({
      m1: ['r1'],
      m2: ['r1'],
      m3: ['r2'],
      m4: ['e1'],
      m5: ['n1'],
      m6: ['n1'],
      m7: ['c1'],
      m8: ['c1'],
      m9: ['a1'],
    });
  });

  it("why 9 has no rolling path: 8's purge on it leaves a message's steps, which 8's lease mode replays and 9's runs afresh", async () => {
    const schema = await freshSchema('roll_steps');
    await eight.migrate(pool, { schema });
    const charged: string[] = [];
    const lease = (core: CoreBuild, by: string) =>
      core.createInbox({
        pool,
        schema,
        consumer: 'payments',
        mode: 'lease',
        storeResult: true,
        logger: false,
        handler: async (e, ctx) =>
          ctx.step('charge', () => {
            charged.push(`${by}:${e.id}`);
            return `${by}:${e.id}`;
          }),
      });
    // A consumer of 8 that kept running through the migration (started before it).
    const old = lease(eight, 'e');
    await old.ready();
    for (const id of ['p1', 'p2'])
      expect(await old.process(envelope(id))).toMatchObject({ status: 'processed' });
    expect(await nine.migrate(pool, { schema })).toMatchObject({ from: 8, to: 9 });
    // A purge job of 8, not stopped either: the messages expire and it deletes them.
    await pool.query(`UPDATE ${quoteIdent(schema)}.inbox SET expires_at = now() - interval '1 second'`);
    expect(await eight.purge(pool, { schema })).toBe(2);
    const steps = async () =>
      (await pool.query(`SELECT message_id FROM ${quoteIdent(schema)}.steps ORDER BY 1`)).rows.map(
        (r) => r.message_id,
      );
    expect(await steps()).toEqual(['p1', 'p2']); // no cascade any more: left behind
    // A later delivery of the same id is a new message. Code of 8 replays the step it finds ...
    expect(await old.process(envelope('p1'))).toMatchObject({ status: 'processed', result: 'e:p1' });
    // ... code of 9 deletes what its fresh claim finds under the id, and runs the step.
    expect(await lease(nine, 'c').process(envelope('p2'))).toMatchObject({
      status: 'processed',
      result: 'c:p2',
    });
    expect(charged).toEqual(['e:p1', 'e:p2', 'c:p2']);
    // 9's purge takes the steps of the rows that lease mode of 9 marked has_steps: p2's. p1's row
    // was written by 8 on schema 9, unmarked, so its step stays until 9's next fresh claim of p1
    // deletes it: one more thing 8 gets wrong on this schema.
    await pool.query(`UPDATE ${quoteIdent(schema)}.inbox SET expires_at = now() - interval '1 second'`);
    expect(await nine.purge(pool, { schema })).toBe(2);
    expect(await steps()).toEqual(['p1']);
    expect(await lease(nine, 'c').process(envelope('p1'))).toMatchObject({
      status: 'processed',
      result: 'c:p1',
    });
    expect(charged).toEqual(['e:p1', 'e:p2', 'c:p2', 'c:p1']);
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
    await eight.migrate(pool, { schema });
    const b1 = consumer(before, schema, table, 'b1');
    await expect(b1.ready()).rejects.toMatchObject({
      code: 'SCHEMA_TOO_NEW',
      message: `schema ${schema} is at version 8, newer than this @once/core understands (7): upgrade @once/core`,
    });
  });
});
