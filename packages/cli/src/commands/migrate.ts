import { migrate } from '@once/core';
import { LATEST_SCHEMA_VERSION, readSchemaState } from '@once/core/admin';
import { type Database, refuseTooNew } from '../database.js';
import type { Report } from '../report.js';

/**
 * `once migrate`: installs or upgrades the schema (core's `migrate`, idempotent). It says which
 * code runs on the result ("compatible from version N": builds of schema version N or later); a
 * newer schema this once still runs on is left as it is.
 */
export async function migrateCommand(db: Database): Promise<Report> {
  // Judged first so a refusal names @once/cli, the package to upgrade; core's migrate() refuses too.
  refuseTooNew(await readSchemaState(db.pool, db.schema));
  const { schema, from, to, compatibleFrom } = await migrate(db.pool, { schema: db.schema });
  const compat = `compatible from version ${compatibleFrom}`;
  const text =
    from !== to
      ? `schema ${schema} migrated from version ${from} to ${to}; ${compat}`
      : to > LATEST_SCHEMA_VERSION
        ? `schema ${schema} is at version ${to}, newer than this once (${LATEST_SCHEMA_VERSION}), and ${compat}: nothing to do`
        : `schema ${schema} is up to date (version ${to}; ${compat})`;
  return { data: { schema, from, to, compatibleFrom, changed: from !== to }, text };
}
