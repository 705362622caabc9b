import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_forget_start', 4);
});
afterAll(async () => {
  await db.close();
});

it('forgetStart takes back one start of that consumer and id, never below zero', async () => {
  const handler = async () => {};
  const a = createInbox({ pool: db.pool, schema: db.schema, consumer: 'forget-a', handler });
  const b = createInbox({ pool: db.pool, schema: db.schema, consumer: 'forget-b', handler });
  const m = envelope('m-forget', { attempt: 2, redelivered: true });
  expect(await a.noteStart(m)).toBe(1);
  expect(await a.noteStart(m)).toBe(2);
  expect(await b.noteStart(m)).toBe(1);
  await a.forgetStart(m);
  expect(await a.noteStart(m)).toBe(2);
  await a.forgetStart(m);
  await a.forgetStart(m);
  await a.forgetStart(m);
  // Never below zero, and no row is made for an id never counted.
  await a.forgetStart(envelope('m-never'));
  const { rows } = await db.pool.query(
    `SELECT consumer, message_id, starts FROM ${db.schema}.starts ORDER BY consumer, message_id`,
  );
  expect(rows).toEqual([
    { consumer: 'forget-a', message_id: 'm-forget', starts: 0 },
    { consumer: 'forget-b', message_id: 'm-forget', starts: 1 },
  ]);
  expect(await a.noteStart(m)).toBe(1);
  await expect(a.forgetStart({ ...m, id: undefined })).rejects.toThrow(/message id is missing/);
});
