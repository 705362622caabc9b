import { afterAll, describe, expect, inject, it } from 'vitest';
import { createLedger, createTestPool, dropSchema, freshSchemaName, serviceUrls } from '../support/index.js';

// Proves the harness itself: the global setup's urls reach the worker, the pool connects, and the
// ledger records and judges effects in a schema of its own.
const pool = createTestPool();
const schema = freshSchemaName('smoke_pg');

afterAll(async () => {
  await dropSchema(pool, schema);
  await pool.end();
});

describe('postgres smoke', () => {
  it('sees the service urls from the global setup', () => {
    expect(process.env.DATABASE_URL).toBeTruthy();
    expect(inject('serviceUrls')).toEqual(serviceUrls());
  });

  it('answers a query', async () => {
    const { rows } = await pool.query<{ one: number; db: string }>(
      'SELECT 1 AS one, current_database() AS db',
    );
    expect(rows).toEqual([{ one: 1, db: new URL(serviceUrls().databaseUrl).pathname.slice(1) }]);
  });

  it('records effects in a transaction and finds the duplicate', async () => {
    const ledger = await createLedger(pool, schema);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await ledger.record(client, { messageId: 'm1', key: 'k', payload: 'a' });
      await ledger.record(client, { messageId: 'm2', key: 'k', payload: 'b' });
      await client.query('COMMIT');
      await client.query('BEGIN');
      await ledger.record(client, { messageId: 'm2', key: 'k', payload: 'b' });
      await client.query('ROLLBACK'); // a rolled-back effect never happened
      await ledger.record(client, { messageId: 'm1', key: 'k', payload: 'a' });
    } finally {
      client.release();
    }
    const verdict = await ledger.check({ expectedIds: ['m1', 'm2', 'm3'], checkOrderPerKey: true });
    expect(verdict).toMatchObject({
      ok: false,
      lost: ['m3'],
      duplicated: [{ id: 'm1', count: 2 }],
      total: 3,
    });
    expect(verdict.orderViolations).toEqual([]);
  });
});
