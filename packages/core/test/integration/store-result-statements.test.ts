import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox } from '../../src/index.js';
import { DATABASE_URL, envelope } from './fixtures/db.js';

// With storeResult on, a handler that returns nothing leaves the result the claim wrote (NULL):
// once sends no UPDATE for it, single or batched (issue #14, second round). A handler that returns
// a value still has it stored, and its duplicates get it back.
let db: Awaited<ReturnType<typeof freshDb>>;
let pool: pg.Pool;
const texts: string[] = [];
beforeAll(async () => {
  db = await freshDb('core_storeres', 2);
  pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0];
      texts.push(typeof first === 'string' ? first : String((first as { text?: unknown }).text));
      return query(...args);
    };
  });
});
afterAll(async () => {
  await pool.end();
  await db.close();
});

const updates = () => texts.filter((t) => /SET result/.test(t)).length;

const inbox = () =>
  createInbox({
    pool,
    schema: db.schema,
    consumer: 'store-result-statements',
    storeResult: true,
    // Ids starting with 'v' return a value, the others nothing.
    handler: async (e) => (e.id!.startsWith('v') ? { id: e.id } : undefined),
  });

it('sends no result UPDATE when every handler returned undefined, single or batched', async () => {
  const ib = inbox();
  texts.length = 0;
  expect(await ib.process(envelope('u-single'))).toMatchObject({ status: 'processed', result: undefined });
  const outs = await ib.processBatch([envelope('u-b1'), envelope('u-b2')]);
  expect(outs.map((o) => o.status)).toEqual(['processed', 'processed']);
  expect(updates()).toBe(0);
  // Redelivered: duplicates with no result, as before.
  const again = await ib.processBatch([envelope('u-single'), envelope('u-b1'), envelope('u-b2')]);
  for (const o of again) expect(o).toMatchObject({ status: 'duplicate', result: undefined });
  const rows = await db.pool.query(
    `SELECT count(*)::int AS n FROM ${db.schema}.inbox WHERE consumer = 'store-result-statements' AND message_id LIKE 'u-%' AND result IS NULL`,
  );
  expect(rows.rows[0].n).toBe(3);
});

it('still stores the results that are values, beside undefined ones in the same batch', async () => {
  const ib = inbox();
  texts.length = 0;
  expect(await ib.process(envelope('v-single'))).toMatchObject({
    status: 'processed',
    result: { id: 'v-single' },
  });
  const outs = await ib.processBatch([envelope('u-b3'), envelope('v-b4'), envelope('u-b5')]);
  expect(outs.map((o) => o.status)).toEqual(['processed', 'processed', 'processed']);
  // One UPDATE for the single message, one for the batch's one value.
  expect(updates()).toBe(2);
  const again = await ib.processBatch(['v-single', 'u-b3', 'v-b4', 'u-b5'].map((id) => envelope(id)));
  expect(again.map((o) => [o.status, 'result' in o ? o.result : 'no result field'])).toEqual([
    ['duplicate', { id: 'v-single' }],
    ['duplicate', undefined],
    ['duplicate', { id: 'v-b4' }],
    ['duplicate', undefined],
  ]);
});
