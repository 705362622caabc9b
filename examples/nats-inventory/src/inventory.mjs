// @ts-check
// The domain: a reservation takes `qty` of an item's stock. The reservation's row and the item's
// total are written in the transaction once opens for the message, next to its claim, so a
// reservation delivered twice (a redelivery, or a re-send JetStream no longer deduplicates) is
// applied once.
import { migrate } from '@once/core';
import { jsonHandler } from '@once/nats';

/** @typedef {{ item: string, qty: number }} Reservation */

/**
 * Installs once's tables and the example's own in `schema`: `reservations` (one row per applied
 * reservation; deliberately no unique key on the id, so a double reservation would show) and
 * `reserved` (per item).
 * @param {import('pg').Pool} pool
 * @param {string} schema
 */
export async function createTables(pool, schema) {
  await migrate(pool, { schema });
  await pool.query(`
    CREATE TABLE IF NOT EXISTS ${schema}.reservations (
      reservation_id text NOT NULL, item text NOT NULL, qty int NOT NULL);
    CREATE INDEX IF NOT EXISTS reservations_id ON ${schema}.reservations (reservation_id);
    CREATE TABLE IF NOT EXISTS ${schema}.reserved (item text PRIMARY KEY, qty bigint NOT NULL)`);
}

/**
 * A parsed body; throwing makes `jsonHandler` record a PermanentError (dead-lettered at once).
 * @param {unknown} v
 * @returns {Reservation}
 */
export function reservation(v) {
  const r = /** @type {Record<string, unknown> | null} */ (v);
  if (typeof r?.item !== 'string' || !Number.isInteger(r.qty) || Number(r.qty) <= 0)
    throw new Error('item (string) and positive integer qty are required');
  return { item: r.item, qty: Number(r.qty) };
}

/**
 * The once handler: reserve the stock and record the reservation, in once's transaction `tx`.
 * @param {string} schema
 */
export function reserveHandler(schema) {
  return jsonHandler(async (/** @type {Reservation} */ r, _envelope, { tx, id }) => {
    await tx.query(
      `INSERT INTO ${schema}.reserved (item, qty) VALUES ($1, $2)
       ON CONFLICT (item) DO UPDATE SET qty = reserved.qty + EXCLUDED.qty`,
      [r.item, r.qty],
    );
    await tx.query(`INSERT INTO ${schema}.reservations (reservation_id, item, qty) VALUES ($1, $2, $3)`, [
      id,
      r.item,
      r.qty,
    ]);
  }, reservation);
}
