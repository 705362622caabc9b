import { ErrorCode, OnceError } from './errors.js';
import { quoteIdentifier } from './identifier.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS } from './migrations.js';
import type { PgPoolLike } from './pg-like.js';
import { inboxSql, migrationSql } from './sql/inbox.js';
import { classifyDbError } from './sqlstate.js';

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** The schema to install into. @default 'once' */
  schema?: string;
}

/** What {@link migrate} did. */
export interface MigrateResult {
  schema: string;
  from: number;
  to: number;
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
 * version row. Refuses a database whose schema is newer than this build.
 */
export async function migrate(pool: PgPoolLike, options: MigrateOptions = {}): Promise<MigrateResult> {
  const name = options.schema ?? 'once';
  const schema = quoteIdentifier(name, 'options.schema');
  const sql = migrationSql(schema);
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    await client.query(sql.lock, [LOCK_NAMESPACE, lockKey(name)]);
    await client.query(sql.createSchema);
    await client.query(sql.createVersionTable);
    const from = Number((await client.query<{ version: number }>(sql.currentVersion)).rows[0]?.version ?? 0);
    if (from > LATEST_SCHEMA_VERSION) {
      throw schemaTooNew(name, from);
    }
    for (const m of MIGRATIONS) {
      if (m.version <= from) continue;
      await client.query(m.sql.replaceAll('{schema}', schema));
      await client.query(sql.recordVersion, [m.version, m.name]);
    }
    await client.query('COMMIT');
    return { schema: name, from, to: Math.max(from, LATEST_SCHEMA_VERSION) };
  } catch (err) {
    await client.query('ROLLBACK').catch((e: Error) => {
      broken = e;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

/** The full schema as one SQL script, for users who apply migrations with their own tool. */
export function schemaSql(options: MigrateOptions = {}): string {
  const schema = quoteIdentifier(options.schema ?? 'once', 'options.schema');
  const sql = migrationSql(schema);
  const parts = [`${sql.createSchema};`, `${sql.createVersionTable};`];
  for (const m of MIGRATIONS) {
    parts.push(`-- ${m.version}: ${m.name}`, m.sql.replaceAll('{schema}', schema).trim());
    parts.push(
      `INSERT INTO ${schema}.schema_version (version, name) VALUES (${m.version}, '${m.name}') ON CONFLICT DO NOTHING;`,
    );
  }
  return `${parts.join('\n')}\n`;
}

function schemaTooNew(schema: string, found: number): OnceError {
  return new OnceError(
    ErrorCode.SchemaTooNew,
    `schema ${schema} is at version ${found}, newer than this @once/core understands (${LATEST_SCHEMA_VERSION}): upgrade @once/core`,
  );
}

/**
 * Verifies that the schema is installed at the version this build expects. Throws a
 * SCHEMA_NOT_INSTALLED or SCHEMA_TOO_NEW error that says what to run.
 */
export async function checkSchema(pool: PgPoolLike, schema: string): Promise<void> {
  const quoted = quoteIdentifier(schema, 'options.schema');
  let version: number;
  try {
    const res = await pool.query<{ version: number | null }>(inboxSql(quoted).schemaVersion);
    version = Number(res.rows[0]?.version ?? 0);
  } catch (err) {
    if (classifyDbError(err) === 'schema-missing') {
      throw new OnceError(
        ErrorCode.SchemaNotInstalled,
        `schema ${schema} is not installed: run \`once migrate\` or call migrate(pool, { schema: '${schema}' })`,
        { cause: err },
      );
    }
    throw err;
  }
  if (version > LATEST_SCHEMA_VERSION) throw schemaTooNew(schema, version);
  if (version < LATEST_SCHEMA_VERSION) {
    throw new OnceError(
      ErrorCode.SchemaNotInstalled,
      `schema ${schema} is at version ${version}, this @once/core needs ${LATEST_SCHEMA_VERSION}: run \`once migrate\` or migrate()`,
    );
  }
}
