import { boundPool, resolvePoolBounds } from '../pg/bounded-pool.js';
import type { PgClientLike, PgPoolLike } from '../pg/pg-like.js';
import { inTransaction } from '../pg/transaction.js';
import { quoteIdentifier } from '../sql/identifier.js';
import { migrationSql } from '../sql/inbox.js';
import { quoteLiteral } from '../sql/literal.js';
import { compatibleFrom, MIGRATIONS, type Migration } from './migrations.js';
import { judgeSchema, refuseTooNew } from './schema-compat.js';

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** The schema to install into. @default 'once' */
  schema?: string;
  /**
   * The longest migrate() waits for the reply to one statement, in ms (a migration's DDL, the
   * advisory lock while another process migrates). Past it the statement fails with
   * `StatementTimeoutError` and its connection is destroyed; the migration's transaction never
   * commits. Longer than the inbox's bound: DDL on a large table takes a while.
   * @default 300000
   */
  statementTimeoutMs?: number;
  /** The longest migrate() waits for a pool connection, in ms. @default 10000 */
  connectTimeoutMs?: number;
}

/** migrate()'s own statement bound: DDL may rewrite or index a large table. */
export const MIGRATE_STATEMENT_TIMEOUT_MS = 300_000;

/** What {@link migrate} did. */
export interface MigrateResult {
  /** The schema migrated. */
  schema: string;
  /** The version installed before (0: none). */
  from: number;
  /** The version now installed: `from` when it was already this build's or newer. */
  to: number;
  /**
   * The oldest code version that runs on the schema now (docs/upgrades.md); null for a newer
   * schema that records none.
   */
  compatibleFrom: number | null;
}

// A fixed first half keeps our advisory locks apart from the application's.
const LOCK_NAMESPACE = 0x6f6e6365; // "once"

function lockKey(schema: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < schema.length; i++) {
    h ^= schema.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

/**
 * Installs or upgrades once's tables. Idempotent, and safe when many processes start at once:
 * an advisory lock serialises them and each migration runs in the same transaction as its
 * version row, which records the oldest code version that runs on the schema. A schema newer
 * than this build is left as it is when this build still runs on it (its newer migrations only
 * expanded what this one uses) and refused with SCHEMA_TOO_NEW when one removed something.
 */
export async function migrate(pool: PgPoolLike, options: MigrateOptions = {}): Promise<MigrateResult> {
  return migrateWith(pool, options, MIGRATIONS);
}

/**
 * {@link migrate} with its list of migrations given, for tests that stand for a newer build.
 * Not exported from the package: a build's migrations are the ones it was released with.
 */
export async function migrateWith(
  userPool: PgPoolLike,
  options: MigrateOptions,
  migrations: readonly Migration[],
): Promise<MigrateResult> {
  const pool = boundPool(
    userPool,
    resolvePoolBounds({
      statementTimeoutMs: options.statementTimeoutMs ?? MIGRATE_STATEMENT_TIMEOUT_MS,
      connectTimeoutMs: options.connectTimeoutMs,
    }),
  );
  const name = options.schema ?? 'once';
  const schema = quoteIdentifier(name, "option 'schema'");
  const sql = migrationSql(schema);
  const latest = migrations[migrations.length - 1]?.version ?? 0;
  // Already current, with every version row's compatibility recorded: nothing to change, so no DDL
  // and no lock, and a role without CREATE (the runtime role of docs/operations.md) may call
  // migrate() at start-up as well. Any failure here (schema missing, no privilege, a version table
  // of an older release) leaves it to the full path, which changes or reports what is wrong. A
  // newer schema also takes the full path, which judges whether this build runs on it.
  const current = await pool.query<{ version: number; unfilled: number }>(sql.currentAndUnfilled).then(
    (r) => r.rows[0],
    () => undefined,
  );
  if (current !== undefined && Number(current.version) === latest && Number(current.unfilled) === 0) {
    return { schema: name, from: latest, to: latest, compatibleFrom: compatibleFrom(migrations, latest) };
  }
  return inTransaction(pool, async (client) => {
    await client.query(sql.lock, [LOCK_NAMESPACE, lockKey(name)]);
    await client.query(sql.createSchema);
    await client.query(sql.createVersionTable);
    await recordCompatibility(client, schema, migrations);
    const from = Number((await client.query<{ version: number }>(sql.currentVersion)).rows[0]?.version ?? 0);
    if (from > latest) {
      const standing = await judgeSchema(client, name, schema, from, migrations);
      refuseTooNew(standing);
      return { schema: name, from, to: from, compatibleFrom: standing.compatibleFrom };
    }
    for (const m of migrations) {
      if (m.version <= from) continue;
      await client.query(m.sql.replaceAll('{schema}', schema));
      await client.query(sql.recordVersion, [
        m.version,
        m.name,
        compatibleFrom(migrations, m.version),
        removes(m),
      ]);
    }
    return { schema: name, from, to: latest, compatibleFrom: compatibleFrom(migrations, latest) };
  });
}

/**
 * The version table of a release before the compatibility columns gets them, and rows it wrote
 * get the values this build knows for them. Only a table that lacks the columns is altered, so a
 * migrate() with nothing to do takes no exclusive lock on it.
 */
async function recordCompatibility(
  client: PgClientLike,
  schema: string,
  migrations: readonly Migration[],
): Promise<void> {
  const sql = migrationSql(schema);
  const { rows } = await client.query<{ n: number }>(sql.compatibilityColumns);
  if ((rows[0]?.n ?? 0) < 2) await client.query(sql.addCompatibilityColumns);
  await client.query(sql.fillCompatibility, [
    migrations.map((m) => m.version),
    migrations.map((m) => compatibleFrom(migrations, m.version)),
    migrations.map(removes),
  ]);
}

function removes(m: Migration): string | null {
  return m.change === 'contract' ? m.removes : null;
}

/** The full schema as one SQL script, for users who apply migrations with their own tool. */
export function schemaSql(options: MigrateOptions = {}): string {
  const schema = quoteIdentifier(options.schema ?? 'once', "option 'schema'");
  const sql = migrationSql(schema);
  // The ALTER gives a version table made by an earlier release the compatibility columns.
  const parts = [`${sql.createSchema};`, `${sql.createVersionTable};`, `${sql.addCompatibilityColumns};`];
  for (const m of MIGRATIONS) {
    const r = removes(m);
    parts.push(`-- ${m.version}: ${m.name} (${m.change})`, m.sql.replaceAll('{schema}', schema).trim());
    parts.push(
      `INSERT INTO ${schema}.schema_version (version, name, compatible_from, removes) VALUES (${m.version}, ${quoteLiteral(m.name)}, ${compatibleFrom(MIGRATIONS, m.version)}, ${r === null ? 'NULL' : quoteLiteral(r)}) ON CONFLICT DO NOTHING;`,
    );
  }
  return `${parts.join('\n')}\n`;
}
