import { migrate } from '@once/core';
import type { Database } from '../database.js';
import type { Report } from '../report.js';

/** `once migrate`: installs or upgrades the schema (core's `migrate`, idempotent). */
export async function migrateCommand(db: Database): Promise<Report> {
  const { schema, from, to } = await migrate(db.pool, { schema: db.schema });
  const text =
    from === to
      ? `schema ${schema} is up to date (version ${to})`
      : `schema ${schema} migrated from version ${from} to ${to}`;
  return { data: { schema, from, to, changed: from !== to }, text };
}
