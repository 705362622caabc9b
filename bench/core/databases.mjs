// One inbox over several databases (issue #31) against the same inbox over one database, at the
// same total load: the same messages, the same number of concurrent lanes, per message and in
// batches of 100. `npm run bench -- --databases`.
//
// Variants, interleaved in every repetition, each on freshly truncated tables:
//   S1   createInbox({ pool }) on database 0 (the baseline);
//   R1   createInbox({ databases: { d0 }, route }) on the same database: the router's own cost;
//   R4   over databases 0–3, messages spread round-robin by tenant;
//   R16  over databases 0–15.
// A batch of 100 over k databases runs as k batches side by side (inbox.ts #processRouted), so
// also measured: batches of 100 per database (100 × k messages from the broker at once).
// Ratios are medians of per-repetition paired ratios, [min–max]: Rk ÷ S1 in msgs/s.
// Size: BENCH_N messages per run (default 12800: four lanes of 16 × 100), BENCH_REPS (5), BENCH_LANES (4), BENCH_DB_MAX
// (connections per database pool, default 4: 16 × 4 = 64 of the server's max_connections 100).
import { writeFileSync } from 'node:fs';
import { createInbox, migrateDatabases } from '@once/core';
import pg from 'pg';
import { fmtRatio, gitCommit, machine, median, pairedRatio } from '../support/report.mjs';

const N = Number(process.env.BENCH_N ?? 12800);
const REPS = Number(process.env.BENCH_REPS ?? 5);
const LANES = Number(process.env.BENCH_LANES ?? 4);
const DB_MAX = Number(process.env.BENCH_DB_MAX ?? 4);
const BASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const COUNT = 16;
const names = Array.from({ length: COUNT }, (_, i) => `once_bench_db_${i}`);

const urlOf = (name) => {
  const u = new URL(BASE_URL);
  u.pathname = `/${name}`;
  return u.toString();
};
const admin = new pg.Client({ connectionString: BASE_URL });
await admin.connect();
for (const name of names) {
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
}
await admin.end();
const pools = names.map((name) => {
  const p = new pg.Pool({ connectionString: urlOf(name), max: DB_MAX });
  p.on('error', () => {});
  return p;
});
// The baseline gets the connections the widest routed variant may use per lane, so it is not
// starved of connections the others have: LANES batches at once, each needing one.
const single = new pg.Pool({ connectionString: urlOf(names[0]), max: Math.max(DB_MAX, LANES) });
single.on('error', () => {});
await migrateDatabases(Object.fromEntries(names.map((n, i) => [n, pools[i]])));
for (const p of pools) await p.query('CREATE TABLE effects (id text NOT NULL, amount int NOT NULL)');

const handler = async (e, { tx }) => {
  await tx.query('INSERT INTO effects (id, amount) VALUES ($1, 7)', [e.id]);
};
const route = (e) => e.headers.db;
const inboxes = {
  S1: createInbox({ pool: single, consumer: 'bench', handler, logger: false }),
  R1: createInbox({ databases: { [names[0]]: pools[0] }, route, consumer: 'bench', handler, logger: false }),
  R4: createInbox({
    databases: Object.fromEntries(names.slice(0, 4).map((n, i) => [n, pools[i]])),
    route,
    consumer: 'bench',
    handler,
    logger: false,
  }),
  R16: createInbox({
    databases: Object.fromEntries(names.map((n, i) => [n, pools[i]])),
    route,
    consumer: 'bench',
    handler,
    logger: false,
  }),
};
const spread = { S1: 1, R1: 1, R4: 4, R16: 16 };

let run = 0;
function envelopes(k) {
  run++;
  return Array.from({ length: N }, (_, i) => ({
    id: `r${run}-${i}`,
    body: Buffer.from(`{"amount":7,"i":${i}}`),
    headers: { db: names[i % k] },
    source: { broker: 'bench', queue: 'q' },
    attempt: 1,
    redelivered: false,
  }));
}

async function truncateAll() {
  await Promise.all(pools.map((p) => p.query('TRUNCATE once.inbox, effects')));
}

async function drive(inbox, envs, batch) {
  const chunks = [];
  for (let i = 0; i < envs.length; i += batch) chunks.push(envs.slice(i, i + batch));
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: LANES }, async () => {
      while (next < chunks.length) {
        let chunk = chunks[next++];
        while (chunk.length > 0) {
          const outs = chunk.length === 1 ? [await inbox.process(chunk[0])] : await inbox.processBatch(chunk);
          for (const o of outs) {
            if (o.status !== 'processed' && !['retry', 'busy', 'not-run'].includes(o.status))
              throw new Error(`unexpected ${o.status} ${o.reason ?? ''} ${o.error?.message ?? ''}`);
          }
          chunk = outs.filter((o) => o.status !== 'processed').map((o) => o.envelope);
        }
      }
    }),
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { rate: (envs.length / ms) * 1000, cpuUs: (cpu.user + cpu.system) / envs.length };
}

const results = {};
// batch100: the broker hands over 100 messages whatever the number of databases, so each
// database's share of a batch shrinks as they grow. batch100/db: 100 per database (100 × k).
const modes = [
  ['msg', () => 1],
  ['batch100', () => 100],
  ['batch100/db', (name) => 100 * spread[name]],
];
// Warm-up: every variant once, small.
for (const [name, inbox] of Object.entries(inboxes)) {
  await drive(inbox, envelopes(spread[name]).slice(0, 400), 1);
  await drive(inbox, envelopes(spread[name]).slice(0, 1000), 100);
}
for (let rep = 0; rep < REPS; rep++) {
  for (const [mode, batchOf] of modes) {
    // Rotate the order within a repetition, so no variant always runs first.
    const order = Object.keys(inboxes);
    for (let r = 0; r < rep % order.length; r++) order.push(order.shift());
    for (const name of order) {
      await truncateAll();
      await single.query('CHECKPOINT').catch(() => {});
      const got = await drive(inboxes[name], envelopes(spread[name]), batchOf(name));
      const key = `${name}/${mode}`;
      results[key] ??= [];
      results[key].push(got);
    }
  }
  process.stdout.write(`rep ${rep + 1}/${REPS} done\n`);
}

// Every message took effect once in its own database.
for (let i = 0; i < COUNT; i++) {
  const { rows } = await pools[i].query(
    'SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM effects',
  );
  if (rows[0].n !== rows[0].d)
    throw new Error(`database ${names[i]}: ${rows[0].n} effects for ${rows[0].d} ids`);
}

console.log(
  `\nbench/core/databases: ${N} messages per run, ${REPS} repetitions, ${LANES} lanes, ${DB_MAX} connections per database pool`,
);
console.log('variant        msgs/s (median)   CPU µs/msg (median)');
for (const [key, runs] of Object.entries(results)) {
  console.log(
    `${key.padEnd(14)} ${median(runs.map((r) => r.rate))
      .toFixed(0)
      .padStart(10)}   ${median(runs.map((r) => r.cpuUs))
      .toFixed(0)
      .padStart(10)}`,
  );
}
const ratios = {};
console.log('\nratio (msgs/s, paired per repetition)   median [min–max]   target');
for (const [mode] of modes) {
  for (const k of ['R1', 'R4', 'R16']) {
    const r = pairedRatio(results[`${k}/${mode}`], results[`S1/${mode}`], (x) => x.rate);
    ratios[`${k}/${mode} ÷ S1/${mode}`] = r;
    console.log(`${`${k}/${mode} ÷ S1/${mode}`.padEnd(40)} ${fmtRatio(r).padEnd(20)} ≥ 0.9`);
  }
}
const file = `bench/results/core-databases-${new Date().toISOString().slice(0, 10)}.json`;
writeFileSync(
  file,
  `${JSON.stringify({ commit: gitCommit(), machine: machine(), N, REPS, LANES, DB_MAX, results, ratios }, null, 2)}\n`,
);
console.log(`\nwritten: ${file}`);
await Promise.all([...pools, single].map((p) => p.end()));
const cleanup = new pg.Client({ connectionString: BASE_URL });
await cleanup.connect();
for (const name of names) await cleanup.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
await cleanup.end();
