import pg from 'pg';
import { serviceEnv } from './env.js';
import { freshSchemaName, quoteIdent } from './isolation.js';

// Tests of operations over several databases (migrateDatabases, `once --database all`) need
// databases of their own on the one PostgreSQL server: made here, dropped by `drop()`.

/** What {@link createDatabases} returns. */
export interface TestDatabases {
  /** The databases' names on the server, in order (`once_mdb_<prefix>_<unique>_<i>`). */
  readonly names: readonly string[];
  /** A connection string per database, in order: `DATABASE_URL` with its database replaced. */
  readonly urls: readonly string[];
  /** A pg Pool on database `i` (max 2, with an error listener); ended by `drop()`. */
  pool(i: number): pg.Pool;
  /** Ends the pools and drops the databases, terminating what is still connected. */
  drop(): Promise<void>;
}

/** The connection string of database `name` on the server of `DATABASE_URL`. */
export function databaseUrl(name: string): string {
  const url = new URL(serviceEnv('DATABASE_URL'));
  url.pathname = `/${name}`;
  return url.toString();
}

/** Creates `count` empty databases with unique names, one at a time (CREATE DATABASE copies template1). */
export async function createDatabases(prefix: string, count: number): Promise<TestDatabases> {
  const base = freshSchemaName(`once_mdb_${prefix}`).slice(0, 58);
  const names = Array.from({ length: count }, (_, i) => `${base}_${i}`);
  const admin = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
  await admin.connect();
  try {
    for (const name of names) await admin.query(`CREATE DATABASE ${quoteIdent(name)}`);
  } finally {
    await admin.end();
  }
  const pools = new Map<number, pg.Pool>();
  return {
    names,
    urls: names.map(databaseUrl),
    pool(i) {
      let p = pools.get(i);
      if (!p) {
        p = new pg.Pool({ connectionString: databaseUrl(names[i]!), max: 2 });
        p.on('error', () => {});
        pools.set(i, p);
      }
      return p;
    },
    async drop() {
      await Promise.all([...pools.values()].map((p) => p.end().catch(() => {})));
      const c = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
      await c.connect();
      try {
        for (const name of names) await c.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
