import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { serviceEnv } from './env.js';

// Test files run in parallel against one PostgreSQL and one broker of each kind, so every
// file gets its own schema and every test its own topic/queue/group: names must never collide
// across workers, reruns, or a run left behind by a killed process.

/** A short random suffix: base-36 time (orders names by creation when eyeballing) + 4 random bytes. */
function suffix(): string {
  return `${Date.now().toString(36)}${randomBytes(4).toString('hex')}`;
}

/** Lower-cases and keeps `[a-z0-9_]`, so the result is a valid unquoted identifier fragment. */
function slug(prefix: string, allowed: RegExp, max: number): string {
  const s = prefix.toLowerCase().replace(allowed, '_').slice(0, max);
  return /^[a-z]/.test(s) ? s : `t${s}`;
}

/**
 * A schema name no other test uses: lower-case, `[a-z0-9_]`, starts with a letter, at most 63
 * bytes (PostgreSQL's identifier limit, beyond which names are silently truncated and may collide).
 */
export function freshSchemaName(prefix = 'test'): string {
  return `${slug(prefix, /[^a-z0-9_]/g, 40)}_${suffix()}`;
}

/**
 * A topic, queue, exchange or consumer-group name no other test uses: `[a-z0-9-]`, at most 60
 * characters, so `.fifo` still fits SQS's 80-character limit and Kafka's 249.
 */
export function uniqueName(prefix = 'test'): string {
  return `${slug(prefix, /[^a-z0-9-]/g, 40).replace(/_/g, '-')}-${suffix()}`;
}

/** Quotes an identifier for SQL; the only place test support builds SQL from a name. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Options for {@link createTestPool}: any `pg.PoolConfig` field, plus a schema for `search_path`. */
export interface TestPoolOptions extends pg.PoolConfig {
  /** Puts this schema first on every connection's `search_path`. @default none */
  readonly schema?: string;
}

/**
 * A pg Pool on `DATABASE_URL` (max 5 clients unless given). It always has an `'error'` listener:
 * tests terminate backends on purpose, and an idle client's error with no listener kills the
 * worker (brianc/node-postgres#1324). The error still reaches whoever uses that client next.
 */
export function createTestPool(opts: TestPoolOptions = {}): pg.Pool {
  const { schema, ...config } = opts;
  const pool = new pg.Pool({
    connectionString: serviceEnv('DATABASE_URL'),
    max: 5,
    ...(schema === undefined ? {} : { options: `-c search_path=${quoteIdent(schema)},public` }),
    ...config,
  });
  pool.on('error', () => {});
  return pool;
}

/** The part of a pg Pool or Client that test support needs. */
export interface QueryableLike {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** Drops a test's schema and everything in it; missing is fine (a test may fail before creating it). */
export async function dropSchema(pool: QueryableLike, name: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${quoteIdent(name)} CASCADE`);
}
