// @ts-check
// The domain: an order becomes an `orders` row and two ledger entries (the customer is debited,
// revenue credited), all written in the transaction once opens for the message, next to its
// claim. A delivery of an order already recorded (a redelivery, a producer re-send) writes nothing.
import { migrate, PermanentError } from '@once/core';

/** @typedef {{ customer: string, sku: string, cents: number }} Order */
/** @typedef {import('pg').Pool} Pool */

/**
 * Installs once's tables and the example's own in `schema`. `orders` has deliberately no unique
 * key on the order id: a double write would show instead of failing.
 * @param {Pool} pool
 * @param {string} schema
 */
export async function createTables(pool, schema) {
  await migrate(pool, { schema });
  await pool.query(`
    CREATE TABLE IF NOT EXISTS ${schema}.orders (
      order_id text NOT NULL, customer text NOT NULL, sku text NOT NULL, cents bigint NOT NULL,
      recorded_at timestamptz NOT NULL DEFAULT now());
    CREATE INDEX IF NOT EXISTS orders_id ON ${schema}.orders (order_id);
    CREATE TABLE IF NOT EXISTS ${schema}.ledger (
      entry bigserial PRIMARY KEY, order_id text NOT NULL, account text NOT NULL,
      debit bigint NOT NULL DEFAULT 0, credit bigint NOT NULL DEFAULT 0)`);
}

/**
 * Parses and validates an order. Anything else is a PermanentError: retrying cannot fix a
 * malformed order, so once records it failed and dead-letters it at once.
 * @param {Buffer} body
 * @returns {Order}
 */
export function parseOrder(body) {
  /** @type {Record<string, unknown> | null} */
  let o;
  try {
    o = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new PermanentError(`the order is not JSON: ${/** @type {Error} */ (err).message}`);
  }
  if (
    typeof o?.customer !== 'string' ||
    typeof o.sku !== 'string' ||
    !Number.isInteger(o.cents) ||
    Number(o.cents) <= 0
  )
    throw new PermanentError('an order needs customer and sku (strings) and positive integer cents');
  return { customer: o.customer, sku: o.sku, cents: Number(o.cents) };
}

/**
 * The once handler for the orders topic.
 * @param {string} schema
 * @returns {import('@once/core').Handler}
 */
export function orderHandler(schema) {
  return async (envelope, { tx, id }) => {
    const order = parseOrder(envelope.body);
    await tx.query(`INSERT INTO ${schema}.orders (order_id, customer, sku, cents) VALUES ($1, $2, $3, $4)`, [
      id,
      order.customer,
      order.sku,
      order.cents,
    ]);
    await tx.query(
      `INSERT INTO ${schema}.ledger (order_id, account, debit, credit)
       VALUES ($1, 'customer:' || $2, $3, 0), ($1, 'revenue', 0, $3)`,
      [id, order.customer, order.cents],
    );
  };
}
