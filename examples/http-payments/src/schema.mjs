// @ts-check
// The tables of this example, in one schema: once's own (inbox with the stored responses, outbox),
// the payments service's `charges` and the receipts service's `receipts`. Neither has a unique key
// on (account, idempotency key) on purpose: a second effect would show as a second row, not be
// hidden by a constraint.

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
    CREATE TABLE IF NOT EXISTS ${s}.charges (
      seq bigserial PRIMARY KEY,
      charge_id text NOT NULL,
      account text NOT NULL,
      idempotency_key text NOT NULL,
      amount_cents bigint NOT NULL,
      currency text NOT NULL,
      description text NOT NULL,
      event_id text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE IF NOT EXISTS ${s}.receipts (
      seq bigserial PRIMARY KEY,
      charge_id text NOT NULL,
      account text NOT NULL,
      idempotency_key text NOT NULL,
      amount_cents bigint NOT NULL,
      event_id text NOT NULL
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
