// Profile harness for issue #14 step 2: one variant per process, so a CPU profile and the GC
// counts belong to that variant alone. Run it under `node --cpu-prof` to see where once's
// microseconds go beside the floor's; it prints Node CPU µs per message and GC counts (scavenges
// per 1,000 messages, a proxy for allocations) for the clean stream.
// Usage: PROFILE_VARIANT=once-msg|once-batch|floor-msg|floor-batch PROFILE_N=5000
//        PROFILE_CONCURRENCY=4 node --cpu-prof --cpu-prof-dir=/tmp/p bench/profile/run.mjs
// bench/profile/summary.mjs <dir> then groups the profile's self time by function.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { PerformanceObserver } from 'node:perf_hooks';
import * as core from '@once/core';
import pg from 'pg';
import { createFloorTable, floorBatch, floorOne } from '../support/floor.mjs';
import { threadNs } from './threads.mjs';

// PROFILE_CORE: a path to another build of @once/core's dist (index.js), to compare two builds.
const { createInbox, migrate } = process.env.PROFILE_CORE ? await import(process.env.PROFILE_CORE) : core;
const VARIANT = process.env.PROFILE_VARIANT ?? 'once-msg';
const N = Number(process.env.PROFILE_N ?? 5000);
const C = Number(process.env.PROFILE_CONCURRENCY ?? 4);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = `once_prof_${VARIANT.replace('-', '_')}_${process.pid}`;
const batch = VARIANT.endsWith('batch') ? 100 : 1;

const pool = new pg.Pool({ connectionString: DB_URL, max: Math.max(C, 2) });
pool.on('error', () => {});
let connects = 0;
pool.on('connect', () => connects++);
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(pool, { schema: SCHEMA });
await pool.query(`CREATE TABLE ${SCHEMA}.effects (id text NOT NULL, amount int NOT NULL)`);
await createFloorTable(pool, SCHEMA);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (id, amount) VALUES ($1, $2)`;
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
    schema: SCHEMA,
    consumer: 'prof',
    lockTimeoutMs: 30_000,
    handler: async (e, { tx }) => {
      await tx.query(EFFECT, [e.id, 7]);
    },
  });
  fn = async (envs) => {
    const outs = envs.length === 1 ? [await inbox.process(envs[0])] : await inbox.processBatch(envs);
    for (const o of outs) if (o.status !== 'processed') throw new Error(`unexpected ${o.status}`);
  };
} else {
  fn = (envs) =>
    envs.length === 1
      ? floorOne(pool, SCHEMA, 'prof', envs[0].id, (q) => q.query(EFFECT, [envs[0].id, 7]))
      : floorBatch(
          pool,
          SCHEMA,
          'prof',
          envs,
          (e) => e.id,
          (q, e) => q.query(EFFECT, [e.id, 7]),
        );
}

async function drive(tag, n) {
  const chunks = [];
  for (let i = 0; i < n; i += batch)
    chunks.push(Array.from({ length: Math.min(batch, n - i) }, (_, k) => envelope(`${tag}-${i + k}`)));
  let next = 0;
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next < chunks.length) await fn(chunks[next++]);
    }),
  );
}

// PROFILE_WARM: messages run before measuring (default min(N, 1000)); a longer warm-up leaves V8's
// compilation of the code under test (on its own threads, counted by process.cpuUsage) out.
await drive('warm', Number(process.env.PROFILE_WARM ?? Math.min(N, 1000)));
let gcs = { minor: 0, major: 0, other: 0 };
const obs = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = e.detail?.kind;
    if (kind === 1) gcs.minor++;
    else if (kind === 2 || kind === 4) gcs.major++;
    else gcs.other++;
  }
});
obs.observe({ entryTypes: ['gc'] });
// PROFILE_OUT: a CPU profile of the measured run alone (warm-up and setup left out).
const session = process.env.PROFILE_OUT ? new Session() : undefined;
if (session) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
}
gcs = { minor: 0, major: 0, other: 0 };
const threads0 = threadNs();
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await drive('run', N);
const secs = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const threads1 = threadNs();
if (session) {
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(process.env.PROFILE_OUT, JSON.stringify(profile));
  session.disconnect();
}
await new Promise((r) => setImmediate(r));
obs.disconnect();
const r = {
  variant: VARIANT,
  n: N,
  concurrency: C,
  msgsPerSec: Math.round(N / secs),
  cpuUsPerMsg: Number(((cpu.user + cpu.system) / N).toFixed(1)),
  userUsPerMsg: Number((cpu.user / N).toFixed(1)),
  systemUsPerMsg: Number((cpu.system / N).toFixed(1)),
  // process.cpuUsage counts every thread; the split says how much of it was the JavaScript thread.
  mainThreadUsPerMsg: threads1 ? Number(((threads1.main - threads0.main) / 1000 / N).toFixed(1)) : null,
  otherThreadsUsPerMsg: threads1 ? Number(((threads1.other - threads0.other) / 1000 / N).toFixed(1)) : null,
  scavengesPer1k: Number(((gcs.minor * 1000) / N).toFixed(2)),
  majorGcs: gcs.major,
  newConnections: connects,
};
console.log(JSON.stringify(r));
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await pool.end();
