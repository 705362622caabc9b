import type { PgPoolLike } from '../pg/pg-like.js';
import { inTransaction } from '../pg/transaction.js';
import { runtimeGrantSql } from '../sql/grants.js';
import { quoteIdentifier } from '../sql/identifier.js';

/**
 * The GRANT statements that let `role` run consumers, relays, `purge` and the `once` command on
 * `schema`, and nothing more: USAGE on the schema (no CREATE), SELECT, INSERT, UPDATE and DELETE
 * on once's tables (no TRUNCATE; DROP and ALTER stay with the owner), `schema_version`
 * read-only, and default privileges so that tables added by later migrations are granted alike.
 * Run them as the role that owns the schema and runs `migrate()` (the default privileges apply to
 * tables that role creates). For your own migration tool or a review; {@link grantRuntime} runs
 * them. The role must be a lower-case SQL identifier.
 */
export function runtimeGrants(schema: string, role: string): readonly string[] {
  return runtimeGrantSql(quoteIdentifier(schema, 'schema'), quoteIdentifier(role, 'role'));
}

/**
 * Runs {@link runtimeGrants} in one transaction on a connection of `pool`, which must be the
 * schema owner's (after `migrate()`). Idempotent.
 */
export async function grantRuntime(pool: PgPoolLike, schema: string, role: string): Promise<void> {
  const statements = runtimeGrants(schema, role);
  await inTransaction(pool, async (client) => {
    for (const s of statements) await client.query(s);
  });
}
