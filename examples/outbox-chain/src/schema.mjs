// @ts-check
// The tables of this example, in one schema: once's own (inbox, outbox), the order service's
// `orders` and the shipping service's `shipments`. Neither has a unique key on the order id on
// purpose: a second effect would show as a second row, not be hidden by a constraint.

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
    CREATE TABLE IF NOT EXISTS ${s}.orders (
      seq bigserial PRIMARY KEY,
      order_id text NOT NULL,
      customer text NOT NULL,
      total_cents bigint NOT NULL,
      event_id uuid NOT NULL
    );
    CREATE TABLE IF NOT EXISTS ${s}.shipments (
      seq bigserial PRIMARY KEY,
      order_id text NOT NULL,
      event_id uuid NOT NULL,
      address text NOT NULL
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
