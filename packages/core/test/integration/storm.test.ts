import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox, type Outcome } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

const IDS = Number(process.env.ONCE_STORM_IDS ?? 1000);
const COPIES = 20;

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_storm', 20);
});
afterAll(async () => {
  await db.close();
});

/** Runs `tasks` with at most `limit` in flight. */
async function pooled<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const out: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < tasks.length) {
        const i = next++;
        out[i] = await tasks[i]!();
      }
    }),
  );
  return out;
}

it(`duplicate storm: ${IDS} ids delivered ${COPIES} times concurrently → one effect each`, async () => {
  const inbox = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'storm',
    lockTimeoutMs: 30_000,
    handler: async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
    },
  });
  // Copies of one id are adjacent, so they really do meet on the claim.
  const tasks: (() => Promise<Outcome>)[] = [];
  for (let i = 0; i < IDS; i++)
    for (let c = 0; c < COPIES; c++) tasks.push(() => inbox.process(envelope(`s${i}`)));
  const outcomes = await pooled(tasks, 16);
  const by = (s: string) => outcomes.filter((o) => o.status === s).length;
  expect(by('processed')).toBe(IDS);
  expect(by('duplicate')).toBe(IDS * (COPIES - 1));
  expect(await db.total()).toBe(IDS);
});

it('control: a naive check-then-insert handler lets duplicates through under the same storm', async () => {
  await db.pool.query(`CREATE TABLE ${db.schema}.naive_seen (id text)`);
  const naive = async (id: string) => {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const seen = await client.query(`SELECT 1 FROM ${db.schema}.naive_seen WHERE id = $1`, [id]);
      if (seen.rowCount === 0) {
        await client.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [`naive-${id}`]);
        await new Promise((r) => setTimeout(r, 1));
        await client.query(`INSERT INTO ${db.schema}.naive_seen (id) VALUES ($1)`, [id]);
      }
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
  const tasks: (() => Promise<void>)[] = [];
  for (let i = 0; i < 100; i++) for (let c = 0; c < COPIES; c++) tasks.push(() => naive(`n${i}`));
  await pooled(tasks, 16);
  const counts = await db.counts();
  const repeated = [...counts].filter(([id, n]) => id.startsWith('naive-') && n > 1);
  expect(repeated.length).toBeGreaterThan(0);
});
