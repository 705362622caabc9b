import type { PgClientLike, PgPoolLike } from './pg-like.js';

/**
 * Runs `body` in one transaction on a connection of `pool`: COMMIT when it resolves, ROLLBACK
 * when it throws (the error is rethrown). A connection whose ROLLBACK failed is destroyed, not
 * returned to the pool.
 */
export async function inTransaction<T>(
  pool: PgPoolLike,
  body: (client: PgClientLike) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await body(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((e: Error) => {
      broken = e;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}
