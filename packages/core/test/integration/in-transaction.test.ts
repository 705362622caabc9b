import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { inTransaction } from '../../src/pg/transaction.js';

// inTransaction (migrate(), grantRuntime() and the bindings' plain transactions) against the real
// database: a COMMIT that PostgreSQL answers with ROLLBACK is a failure, never a success.

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_in_tx', 8);
});
afterAll(async () => {
  await db?.close();
});

describe('inTransaction on PostgreSQL', () => {
  it('rejects when the body swallowed a failed query (COMMIT answers ROLLBACK), and nothing is written', async () => {
    await expect(
      inTransaction(db.pool, async (client) => {
        await client.query(`INSERT INTO ${db.effects} (id) VALUES ('swallowed')`);
        await client.query('SELECT 1 / 0').catch(() => {});
        return 'done';
      }),
    ).rejects.toMatchObject({ code: 'COMMIT_ROLLED_BACK' });
    expect((await db.counts()).get('swallowed')).toBeUndefined();
  });

  it('commits the body’s writes', async () => {
    await inTransaction(db.pool, async (client) => {
      await client.query(`INSERT INTO ${db.effects} (id) VALUES ('committed')`);
    });
    expect((await db.counts()).get('committed')).toBe(1);
  });

  it('rejects with the constraint’s error when a deferred constraint fails at COMMIT', async () => {
    await db.pool.query(
      `CREATE TABLE ${db.schema}.deferred (id int, CONSTRAINT u UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)`,
    );
    await expect(
      inTransaction(db.pool, async (client) => {
        await client.query(`INSERT INTO ${db.schema}.deferred VALUES (1), (1)`);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ${db.schema}.deferred`)).rows[0].n).toBe(0);
  });
});
