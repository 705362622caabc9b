import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox } from '../../src/index.js';
import { checkEffectsOnce, makeEnvelope } from '../../src/testing/index.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_testing', 12);
});
afterAll(async () => {
  await db.close();
});

const countEffects = async (id: string) =>
  (await db.pool.query(`SELECT count(*) AS n FROM ${db.effects} WHERE id = $1`, [id])).rows[0].n;

it('checkEffectsOnce passes a handler that writes through ctx.tx', async () => {
  const inbox = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'user-good',
    lockTimeoutMs: 20_000,
    handler: async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
    },
  });
  const report = await checkEffectsOnce(inbox, makeEnvelope({ id: 'good', body: { amount: 5 } }), {
    countEffects,
  });
  expect(report.violations).toEqual([]);
  const [storm, failure, crash] = report.scenarios;
  expect(storm!.outcomes.filter((o) => o === 'processed')).toHaveLength(1);
  expect(failure!.outcomes).toEqual(['retry', 'processed']);
  expect(crash!.outcomes).toEqual(['processed', 'duplicate']);
});

it('checkEffectsOnce catches a handler that writes outside its transaction', async () => {
  const inbox = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'user-bad',
    handler: async (e) => {
      await db.pool.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
    },
  });
  const report = await checkEffectsOnce(inbox, makeEnvelope({ id: 'bad' }), { countEffects });
  expect(report.violations.some((v) => v.startsWith('failure-then-redelivery: 2 effects'))).toBe(true);
});
