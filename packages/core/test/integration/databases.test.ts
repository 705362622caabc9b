import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabases, type TestDatabases } from '../../../../test/support/index.js';
import { LATEST_SCHEMA_VERSION, purgeDatabases } from '../../src/admin/index.js';
import { DatabasesError, ErrorCode, migrate, migrateDatabases, OnceError } from '../../src/index.js';
import { migrateWith } from '../../src/schema/migrate.js';
import { MIGRATIONS, type Migration } from '../../src/schema/migrations.js';

// migrateDatabases and purgeDatabases over three real databases on the one server, each with
// its own once schema (the default, 'once'), as a database per tenant has.

// A newer build's contract migration (as in schema-compat.test.ts): this build refuses its schema.
const CONTRACT: Migration = {
  version: LATEST_SCHEMA_VERSION + 1,
  name: 'short-ids',
  change: 'contract',
  removes: 'message ids longer than 256 characters (inbox.message_id is checked)',
  sql: 'ALTER TABLE {schema}.inbox ADD CONSTRAINT inbox_short_ids CHECK (length(message_id) <= 256);',
};

let dbs: TestDatabases;
// Nothing listens on port 1 of loopback: connecting is refused at once.
const unreachable = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/none', max: 1 });
unreachable.on('error', () => {});
beforeAll(async () => {
  dbs = await createDatabases('core', 3);
});
afterAll(async () => {
  await unreachable.end();
  await dbs.drop();
});

async function installed(i: number): Promise<number> {
  const { rows } = await dbs.pool(i).query('SELECT max(version)::int AS v FROM once.schema_version');
  return rows[0].v;
}

function failure(run: () => Promise<unknown>): Promise<DatabasesError> {
  return run().then(
    () => {
      throw new Error('expected it to fail');
    },
    (err: unknown) => {
      expect(err).toBeInstanceOf(DatabasesError);
      return err as DatabasesError;
    },
  );
}

describe('migrateDatabases', () => {
  it('migrates three databases from nothing, in the order given', async () => {
    const results = await migrateDatabases({
      alpha: dbs.pool(0),
      'beta.2': dbs.pool(1),
      'gamma-3': dbs.pool(2),
    });
    expect(results).toEqual(
      ['alpha', 'beta.2', 'gamma-3'].map((name) => ({
        name,
        result: expect.objectContaining({ schema: 'once', from: 0, to: LATEST_SCHEMA_VERSION }),
      })),
    );
    for (const i of [0, 1, 2]) expect(await installed(i)).toBe(LATEST_SCHEMA_VERSION);
    // Again: nothing to do in any of them.
    const again = await migrateDatabases({ alpha: dbs.pool(0), beta: dbs.pool(1), gamma: dbs.pool(2) });
    expect(again.map((r) => r.result.from)).toEqual([
      LATEST_SCHEMA_VERSION,
      LATEST_SCHEMA_VERSION,
      LATEST_SCHEMA_VERSION,
    ]);
  });

  it('a database at a newer schema is refused alone: the others are migrated and the error names it', async () => {
    const schema = 'once_newer';
    await migrateWith(dbs.pool(1), { schema }, [...MIGRATIONS, CONTRACT]);
    const err = await failure(() =>
      migrateDatabases({ t0: dbs.pool(0), t1: dbs.pool(1), t2: dbs.pool(2) }, { schema }),
    );
    expect(OnceError.is(err)).toBe(true);
    expect(err.code).toBe(ErrorCode.MigrateFailed);
    expect(err.message).toMatch(/^migrate failed in 1 of 3 databases: t1 \(SCHEMA_TOO_NEW: /);
    expect(err.results.map((r) => r.name)).toEqual(['t0', 't1', 't2']);
    expect(err.results[0]).toEqual({ name: 't0', result: expect.objectContaining({ schema, from: 0 }) });
    expect(err.results[2]).toEqual({ name: 't2', result: expect.objectContaining({ schema, from: 0 }) });
    const refused = err.results[1] as { error: OnceError };
    expect(refused.error.code).toBe(ErrorCode.SchemaTooNew);
    expect(err.retryable).toBe(false);
    for (const i of [0, 2]) {
      const { rows } = await dbs.pool(i).query(`SELECT max(version)::int AS v FROM ${schema}.schema_version`);
      expect(rows[0].v).toBe(LATEST_SCHEMA_VERSION);
    }
    // The newer schema is as the newer build left it.
    const { rows } = await dbs.pool(1).query(`SELECT max(version)::int AS v FROM ${schema}.schema_version`);
    expect(rows[0].v).toBe(LATEST_SCHEMA_VERSION + 1);
  });

  it('a database that cannot be reached fails alone, after the ones before it and before the ones after it', async () => {
    const schema = 'once_reach';
    const err = await failure(() =>
      migrateDatabases({ first: dbs.pool(0), down: unreachable, last: dbs.pool(2) }, { schema }),
    );
    expect(err.code).toBe(ErrorCode.MigrateFailed);
    expect(err.message).toMatch(/^migrate failed in 1 of 3 databases: down \(ECONNREFUSED: /);
    expect(err.retryable).toBe(true);
    expect(err.results).toEqual([
      { name: 'first', result: expect.objectContaining({ schema, from: 0, to: LATEST_SCHEMA_VERSION }) },
      { name: 'down', error: expect.any(Error) },
      { name: 'last', result: expect.objectContaining({ schema, from: 0, to: LATEST_SCHEMA_VERSION }) },
    ]);
  });

  it('works on one database at a time', async () => {
    // The real pools, with a count of the databases that have a connection checked out.
    const busy = new Set<string>();
    let most = 0;
    const watched = (name: string, pool: pg.Pool): pg.Pool =>
      ({
        query: async (text: string, values?: unknown[]) => {
          busy.add(name);
          most = Math.max(most, busy.size);
          try {
            return await pool.query(text, values);
          } finally {
            busy.delete(name);
          }
        },
        connect: async () => {
          const client = await pool.connect();
          busy.add(name);
          most = Math.max(most, busy.size);
          const release = client.release.bind(client);
          client.release = (err?: Error | boolean) => {
            busy.delete(name);
            return release(err);
          };
          return client;
        },
      }) as unknown as pg.Pool;
    const results = await migrateDatabases(
      { a: watched('a', dbs.pool(0)), b: watched('b', dbs.pool(1)), c: watched('c', dbs.pool(2)) },
      { schema: 'once_serial' },
    );
    expect(results.map((r) => r.name)).toEqual(['a', 'b', 'c']);
    expect(most).toBe(1);
  });

  it('refuses a bad name before touching any database', async () => {
    const schema = 'once_badname';
    await expect(
      migrateDatabases({ good: dbs.pool(0), 'tenant a': dbs.pool(1) }, { schema }),
    ).rejects.toMatchObject({
      code: ErrorCode.InvalidOption,
      message: expect.stringContaining("option 'databases.tenant a'"),
    });
    const { rows } = await dbs.pool(0).query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    expect(rows).toEqual([]);
  });
});

describe('purgeDatabases', () => {
  async function insert(i: number, consumer: string, n: number, expires: string): Promise<void> {
    await dbs.pool(i).query(
      `INSERT INTO once.inbox (consumer, message_id, fingerprint, status, expires_at)
       SELECT $1, 'r' || g, '\\x00', 'done', ${expires} FROM generate_series(1, $2::int) AS g`,
      [consumer, n],
    );
  }
  async function counts(i: number): Promise<Record<string, number>> {
    const { rows } = await dbs
      .pool(i)
      .query('SELECT consumer, count(*)::int AS n FROM once.inbox GROUP BY consumer');
    return Object.fromEntries(rows.map((r) => [r.consumer, r.n]));
  }

  it('deletes the expired rows of each database, one database after the other', async () => {
    for (const i of [0, 1, 2]) await migrate(dbs.pool(i));
    const expired = [120, 0, 35];
    for (const i of [0, 1, 2]) {
      if (expired[i]) await insert(i, 'old', expired[i]!, "now() - interval '1 hour'");
      await insert(i, 'live', 10 + i, "now() + interval '1 hour'");
    }
    const progress: [string, number][] = [];
    const results = await purgeDatabases(
      { a: dbs.pool(0), b: dbs.pool(1), c: dbs.pool(2) },
      { batchSize: 50, pauseBetweenMs: 10, onProgress: (name, n) => progress.push([name, n]) },
    );
    expect(results).toEqual([
      { name: 'a', deleted: 120 },
      { name: 'b', deleted: 0 },
      { name: 'c', deleted: 35 },
    ]);
    expect(progress).toEqual([
      ['a', 50],
      ['a', 100],
      ['a', 120],
      ['c', 35],
    ]);
    for (const i of [0, 1, 2]) expect(await counts(i)).toEqual({ live: 10 + i });
  });

  it('one database failing does not stop the others; the error names it and keeps their counts', async () => {
    for (const i of [0, 2]) await insert(i, 'old2', 7, "now() - interval '1 hour'");
    const err = await failure(() =>
      purgeDatabases({ a: dbs.pool(0), down: unreachable, c: dbs.pool(2) }, { pauseBetweenMs: 0 }),
    );
    expect(err.code).toBe(ErrorCode.PurgeFailed);
    expect(err.message).toMatch(/^purge failed in 1 of 3 databases: down \(ECONNREFUSED: /);
    expect(err.results).toEqual([
      { name: 'a', deleted: 7 },
      { name: 'down', error: expect.any(Error) },
      { name: 'c', deleted: 7 },
    ]);
    await expect(purgeDatabases({ a: dbs.pool(0) }, { pauseBetweenMs: -1 })).rejects.toMatchObject({
      code: ErrorCode.InvalidOption,
      message: "option 'pauseBetweenMs' must be at least 0 ms, got -1",
    });
  });
});
