import { ErrorCode, OnceError } from '../errors.js';
import { boundPool, DEFAULT_POOL_BOUNDS, isBounded } from '../pg/bounded-pool.js';
import type { PgPoolLike } from '../pg/pg-like.js';
import { classifyDbError } from '../pg/sqlstate.js';
import { quoteIdentifier } from '../sql/identifier.js';
import { inboxSql } from '../sql/inbox.js';
import { LATEST_SCHEMA_VERSION } from './migrations.js';
import { judgeSchema, refuseTooNew } from './schema-compat.js';

/**
 * Verifies that the schema is installed at the version this build expects, or at a newer one
 * this build still runs on (docs/upgrades.md). Throws a SCHEMA_NOT_INSTALLED or SCHEMA_TOO_NEW
 * error that says what to run or upgrade.
 */
export function checkSchema(pool: PgPoolLike, schema: string): Promise<void> {
  // An inbox's pool keeps its own bounds; a pool of the caller's gets the defaults.
  return checkSchemaOn(isBounded(pool) ? pool : boundPool(pool, DEFAULT_POOL_BOUNDS), schema);
}

async function checkSchemaOn(pool: PgPoolLike, schema: string): Promise<void> {
  const quoted = quoteIdentifier(schema, "option 'schema'");
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
  // A newer schema is fine unless a contract migration removed something this build uses.
  if (version > LATEST_SCHEMA_VERSION) refuseTooNew(await judgeSchema(pool, schema, quoted, version));
  if (version < LATEST_SCHEMA_VERSION) {
    throw new OnceError(
      ErrorCode.SchemaNotInstalled,
      `schema ${schema} is at version ${version}, this @once/core needs ${LATEST_SCHEMA_VERSION}: run \`once migrate\` or migrate()`,
    );
  }
}
