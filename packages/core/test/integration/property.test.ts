import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox, type Envelope, type Handler } from '../../src/index.js';
import { connectionLost, envelope, faultyPool } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_prop', 12);
});
afterAll(async () => {
  await db.close();
});

type Fault = 'none' | 'throw' | 'lose-commit' | 'commit-lost-reply' | 'batch';
const step = fc.record({
  ids: fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 4 }),
  fault: fc.constantFrom<Fault>('none', 'none', 'throw', 'lose-commit', 'commit-lost-reply', 'batch'),
  concurrent: fc.boolean(),
});

let run = 0;

it('random interleavings of deliveries, failures and lost commits: effects = distinct ids processed', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
      const consumer = `prop${run++}`;
      const idOf = (n: number) => `${consumer}-${n}`;
      const handler =
        (fail: boolean): Handler =>
        async (e, { tx }) => {
          await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
          if (fail) throw new Error('transient');
        };
      const make = (fault: Fault) => {
        const pool =
          fault === 'lose-commit'
            ? faultyPool(db.pool, ({ text }) => {
                if (text === 'COMMIT') throw connectionLost();
                return undefined;
              })
            : fault === 'commit-lost-reply'
              ? faultyPool(db.pool, ({ text }) => (text === 'COMMIT' ? 'after' : undefined))
              : db.pool;
        return createInbox({
          pool,
          schema: db.schema,
          consumer,
          handler: handler(fault === 'throw'),
          lockTimeoutMs: 20_000,
        });
      };
      for (const s of steps) {
        const inbox = make(s.fault);
        const envs: Envelope[] = s.ids.map((n) => envelope(idOf(n), { body: Buffer.from('{}') }));
        if (s.fault === 'batch') await inbox.processBatch(envs);
        else if (s.concurrent) await Promise.all(envs.map((e) => inbox.process(e)));
        else for (const e of envs) await inbox.process(e);
      }
      // Finally every id is redelivered cleanly, as the broker eventually would.
      const clean = make('none');
      const delivered = new Set(steps.flatMap((s) => s.ids));
      for (const n of delivered) {
        const o = await clean.process(
          envelope(idOf(n), { body: Buffer.from('{}'), redelivered: true, attempt: 2 }),
        );
        expect(['processed', 'duplicate']).toContain(o.status);
      }
      const counts = await db.counts();
      for (const n of delivered) expect(counts.get(idOf(n))).toBe(1);
    }),
    { numRuns: Number(process.env.ONCE_PROPERTY_RUNS ?? 40) },
  );
});
