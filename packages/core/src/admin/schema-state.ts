import type { Queryable } from '../pg/pg-like.js';
import { classifyDbError } from '../pg/sqlstate.js';
import { LATEST_SCHEMA_VERSION } from '../schema/migrations.js';
import { judgeSchema, type SchemaStatus } from '../schema/schema-compat.js';
import { quoteIdentifier } from '../sql/identifier.js';
import { migrationSql } from '../sql/inbox.js';

/** Where an installed schema stands against this build of @once/core. */
export interface SchemaState {
  /** The schema it is about. */
  readonly schema: string;
  /** The highest applied migration; 0 when the schema is not installed. */
  readonly version: number;
  /** The version this build expects (`LATEST_SCHEMA_VERSION`). */
  readonly latestVersion: number;
  /**
   * `not-installed` (version 0), `behind` (run `migrate`), `current`, `ahead` (a newer
   * @once/core migrated it and only expanded what this one uses: this one still runs on it), or
   * `too-new` (a newer @once/core removed something this one uses: upgrade this one).
   */
  readonly status: SchemaStatus;
  /**
   * The oldest code version (schema version of a build) that runs on the schema; null when it
   * is not installed, or is newer and records none (docs/upgrades.md).
   */
  readonly compatibleFrom: number | null;
  /** `too-new` only: which migration removed what, in words; null otherwise. */
  readonly tooNew: string | null;
}

/**
 * Reads the installed version of `schema` and judges it (`checkSchema` throws instead).
 * A missing schema or version table is version 0; any other failure is thrown.
 */
export async function readSchemaState(db: Queryable, schema: string): Promise<SchemaState> {
  const quoted = quoteIdentifier(schema, 'schema');
  const sql = migrationSql(quoted);
  let version: number;
  try {
    version = Number((await db.query<{ version: number }>(sql.currentVersion)).rows[0]?.version ?? 0);
  } catch (err) {
    // 42P01/3F000: no schema_version table, so nothing of once is there.
    if (classifyDbError(err) !== 'schema-missing') throw err;
    version = 0;
  }
  const standing = await judgeSchema(db, schema, quoted, version);
  return { schema, version, latestVersion: LATEST_SCHEMA_VERSION, ...standing };
}
