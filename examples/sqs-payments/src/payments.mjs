// @ts-check
// The domain: payments debit an account. The debit and the payment's row are written in the
// transaction once opens for the message, next to its claim, so a payment delivered twice (a
// redelivery, or a producer re-send SQS cannot catch) is applied once.
import { migrate } from '@once/core';
import { jsonHandler } from '@once/sqs';

/** @typedef {{ account: string, cents: number }} Payment */
/** @typedef {import('pg').Pool} Pool */

/**
 * Installs once's tables and the example's own in `schema`: `payments` (one row per applied
 * payment; deliberately no unique key on the id, so a double debit would show) and `balances`.
 * @param {Pool} pool
 * @param {string} schema
 */
export async function createTables(pool, schema) {
  await migrate(pool, { schema });
  await pool.query(`
    CREATE TABLE IF NOT EXISTS ${schema}.payments (
      payment_id text NOT NULL, account text NOT NULL, cents bigint NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now());
    CREATE INDEX IF NOT EXISTS payments_id ON ${schema}.payments (payment_id);
    CREATE TABLE IF NOT EXISTS ${schema}.balances (account text PRIMARY KEY, cents bigint NOT NULL)`);
}

/**
 * Validates a parsed body; throwing makes `jsonHandler` record a PermanentError, so the message
 * is dead-lettered at once instead of retried.
 * @param {unknown} v
 * @returns {Payment}
 */
export function payment(v) {
  const p = /** @type {Record<string, unknown> | null} */ (v);
  if (typeof p?.account !== 'string' || !Number.isInteger(p.cents) || Number(p.cents) <= 0)
    throw new Error('account (string) and positive integer cents are required');
  return { account: p.account, cents: Number(p.cents) };
}

/**
 * The once handler: debit the account and record the payment, in once's transaction `tx`.
 * @param {string} schema
 */
export function debitHandler(schema) {
  return jsonHandler(async (/** @type {Payment} */ p, _envelope, { tx, id }) => {
    await tx.query(
      `INSERT INTO ${schema}.balances (account, cents) VALUES ($1, -$2::bigint)
       ON CONFLICT (account) DO UPDATE SET cents = balances.cents + EXCLUDED.cents`,
      [p.account, p.cents],
    );
    await tx.query(`INSERT INTO ${schema}.payments (payment_id, account, cents) VALUES ($1, $2, $3)`, [
      id,
      p.account,
      p.cents,
    ]);
  }, payment);
}
