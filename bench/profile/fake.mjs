// Once's own CPU per message, without PostgreSQL: the inbox over a fake pool whose queries answer
// at once (claims take every id), beside the floor's code over the same fake. What is left is the
// JavaScript each runs per message: the engine's overhead, free of round trips and of the
// machine's noise. Usage: FAKE_VARIANT=once-msg|once-batch|floor-msg|floor-batch FAKE_N=200000
//   node [--cpu-prof] bench/profile/fake.mjs
import * as core from '@once/core';
import { floorBatch, floorOne } from '../support/floor.mjs';
import { fakePool } from './fake-pg.mjs';

const { createInbox } = process.env.PROFILE_CORE ? await import(process.env.PROFILE_CORE) : core;
const VARIANT = process.env.FAKE_VARIANT ?? 'once-msg';
const N = Number(process.env.FAKE_N ?? 200_000);
const batch = VARIANT.endsWith('batch') ? 100 : 1;

const { pool, client } = fakePool();
const EFFECT = 'INSERT INTO effects (id, amount) VALUES ($1, $2)';
const envelope = (id) => ({
  id,
  body: Buffer.from(`{"amount":7,"id":"${id}"}`),
  headers: {},
  source: { broker: 'bench', queue: 'q' },
  attempt: 1,
  redelivered: false,
});

let fn;
if (VARIANT.startsWith('once')) {
  const inbox = createInbox({
    pool,
    schema: 'fake',
    consumer: 'prof',
    handler: async (e, { tx }) => {
      await tx.query(EFFECT, [e.id, 7]);
    },
  });
  // The schema check is the only read before the first message: answer it as a current schema.
  pool.query = () => Promise.resolve({ rows: [{ version: 1e9, compatible_from: 0 }], rowCount: 1 });
  await inbox.ready().catch(() => {});
  pool.query = (t) => client.query(t);
  fn = async (envs) => {
    const outs = envs.length === 1 ? [await inbox.process(envs[0])] : await inbox.processBatch(envs);
    for (const o of outs)
      if (o.status !== 'processed') throw new Error(`unexpected ${o.status} ${o.error?.message}`);
  };
} else {
  fn = (envs) =>
    envs.length === 1
      ? floorOne(pool, 'fake', 'prof', envs[0].id, (q) => q.query(EFFECT, [envs[0].id, 7]))
      : floorBatch(
          pool,
          'fake',
          'prof',
          envs,
          (e) => e.id,
          (q, e) => q.query(EFFECT, [e.id, 7]),
        );
}

async function drive(tag, n) {
  for (let i = 0; i < n; i += batch) {
    await fn(Array.from({ length: Math.min(batch, n - i) }, (_, k) => envelope(`${tag}-${i + k}`)));
  }
}
await drive('warm', Math.min(N, 20_000));
const cpu0 = process.cpuUsage();
await drive('run', N);
const cpu = process.cpuUsage(cpu0);
console.log(
  JSON.stringify({ variant: VARIANT, n: N, cpuUsPerMsg: Number(((cpu.user + cpu.system) / N).toFixed(2)) }),
);
