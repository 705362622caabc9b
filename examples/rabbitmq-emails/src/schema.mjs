// @ts-check
// The tables of this example, in one schema: once's own (inbox, steps, outbox), the consumer's
// `email_log`, and the two tables of the fake mail API (which stands for a provider's database,
// not ours: it lives here only so the demo can count what the provider delivered).

import { migrate } from '@once/core';
import { quoteIdentifier } from '@once/core/admin';

/**
 * Installs once's tables and the example's tables in `schema`.
 * @param {import('pg').Pool} pool
 * @param {string} schema
 */
export async function setupSchema(pool, schema) {
  await migrate(pool, { schema });
  const s = quoteIdentifier(schema, 'schema');
  await pool.query(`
    CREATE TABLE IF NOT EXISTS ${s}.email_log (
      message_id text NOT NULL,
      provider_email_id text NOT NULL,
      logged_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE IF NOT EXISTS ${s}.mail_api_calls (
      seq bigserial PRIMARY KEY,
      idempotency_key text NOT NULL,
      called_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE IF NOT EXISTS ${s}.mail_api_emails (
      id bigserial PRIMARY KEY,
      idempotency_key text NOT NULL UNIQUE,
      request_sha256 text NOT NULL,
      reference text NOT NULL,
      recipient text NOT NULL,
      subject text NOT NULL,
      delivered_at timestamptz NOT NULL DEFAULT now()
    )`);
}

/**
 * The schema name for a run id: identifiers only, lower case.
 * @param {string} prefix
 * @param {string} run
 */
export function schemaFor(prefix, run) {
  return `${prefix}_${run.replace(/\W/g, '_')}`.toLowerCase();
}
