/**
 * The least-privilege grants of a schema: what a runtime role (consumers, relays, purge, the CLI)
 * needs on once's tables, and nothing that changes their shape. `schema` and `role` are validated
 * and quoted by `quoteIdentifier`.
 *
 * - USAGE on the schema, no CREATE: the role cannot add objects to it.
 * - SELECT, INSERT, UPDATE, DELETE on every table of the schema (inbox, outbox, steps, fences,
 *   starts and what later migrations add); no TRUNCATE, REFERENCES or TRIGGER. DROP and ALTER
 *   belong to the owner, never grantable.
 * - schema_version read-only: only migrations record versions.
 * - Default privileges, so the tables a later migration creates (run by the same owner) are
 *   granted the same way without running this again.
 */
export function runtimeGrantSql(schema: string, role: string): readonly string[] {
  return Object.freeze([
    `GRANT USAGE ON SCHEMA ${schema} TO ${role}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${role}`,
    `REVOKE INSERT, UPDATE, DELETE ON ${schema}.schema_version FROM ${role}`,
    `ALTER DEFAULT PRIVILEGES IN SCHEMA ${schema} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${role}`,
  ]);
}
