import { quoteIdentifier } from '../identifier.js';
import { LATEST_SCHEMA_VERSION } from '../migrations.js';
import type { Queryable } from '../outbox.js';
import { migrationSql } from '../sql/inbox.js';
import { classifyDbError } from '../sqlstate.js';

/** Where an installed schema stands against this build of @once/core. */
export interface SchemaState {
  readonly schema: string;
  /** The highest applied migration; 0 when the schema is not installed. */
  readonly version: number;
  /** The version this build expects (`LATEST_SCHEMA_VERSION`). */
  readonly latestVersion: number;
  /**
   * `not-installed` (version 0), `behind` (run `migrate`), `current`, or `ahead` (a newer
   * @once/core migrated it: upgrade this one).
   */
  readonly status: 'not-installed' | 'behind' | 'current' | 'ahead';
}

/**
 * Reads the installed version of `schema` without judging it (`checkSchema` throws instead).
 * A missing schema or version table is version 0; any other failure is thrown.
 */
export async function readSchemaState(db: Queryable, schema: string): Promise<SchemaState> {
  const sql = migrationSql(quoteIdentifier(schema, 'schema'));
  let version: number;
  try {
    version = Number((await db.query<{ version: number }>(sql.currentVersion)).rows[0]?.version ?? 0);
  } catch (err) {
    // 42P01/3F000: no schema_version table, so nothing of once is there.
    if (classifyDbError(err) !== 'schema-missing') throw err;
    version = 0;
  }
  const status =
    version === 0
      ? 'not-installed'
      : version < LATEST_SCHEMA_VERSION
        ? 'behind'
        : version === LATEST_SCHEMA_VERSION
          ? 'current'
          : 'ahead';
  return { schema, version, latestVersion: LATEST_SCHEMA_VERSION, status };
}
