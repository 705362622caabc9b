// What an HTTP key costs PostgreSQL, by statement (issue #26, Speed): the statements @once/http's
// transaction mode sends for a new key and for a replay (as built in packages/core/src/sql/http.ts),
// against a plain route's BEGIN, write, COMMIT, and variants that each leave one part out, so the
// difference in the server's CPU per request is that part's price. No HTTP, no Node work measured:
// one connection, requests one after another, the route's write an INSERT into an index-less table.
//
// Variants (BENCH_N requests each, default 2,000, every one a new key but `replay`):
//   plain     BEGIN; the write; COMMIT (three round trips)
//   once      BEGIN + claim + read + savepoint; the write; store the response + COMMIT (three)
//   no-read   once without the read of the key's row in the claim's round trip (a replay would
//             then need a second round trip to read its answer)
//   no-store  once with COMMIT alone at the end: the price of storing the response (UPDATE)
//   no-sp     once without the savepoint (a 4xx could not keep its claim and undo its writes)
//   claim     BEGIN + the claim alone; the write; COMMIT: the price of the claim's INSERT
//   replay    once's first round trip on keys that are done, then ROLLBACK
// Then the same two transactions, plain and once, from 16 clients on a pool (BENCH_C16_N requests
// a run, default 2,000, the same repetitions): the rate the SQL alone allows, with no HTTP and no
// engine, and the Node CPU the pg client spends on it.
// The server's CPU is the backend's own (utime + stime from /proc, in clock ticks of 10 ms) over a
// run; on a machine shared with other work it is the figure that load disturbs least. BENCH_REPS
// (default 7) interleaved repetitions, the order rotating; medians, and each variant ÷ plain and
// ÷ once, paired per repetition. Results: bench/results/http-pg-round.json (BENCH_OUT: another
// file). `npm run build` first.
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { migrate } from '@once/core';
import pg from 'pg';
import { httpSql } from '../../packages/core/dist/sql/http.js';
import { fmtRatio, gitCommit, machine, median, pairedRatio } from '../support/report.mjs';

const N = Number(process.env.BENCH_N ?? 2000);
const REPS = Number(process.env.BENCH_REPS ?? 7);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = 'bench_http_pg_round';
const Q = `"${SCHEMA}"`;

const setup = new pg.Pool({ connectionString: DB_URL, max: 1 });
await setup.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(setup, { schema: SCHEMA });
await setup.query(
  `CREATE TABLE ${Q}.effects (key text NOT NULL, account text NOT NULL, amount int NOT NULL)`,
);
await setup.end();

const sql = httpSql(Q);
const claim = sql.beginClaimAndRead('read committed', 1000);
const FP = 'ab'.repeat(32);
const RETENTION_MS = 86_400_000;
const EFFECT = `INSERT INTO ${Q}.effects (key, account, amount) VALUES ($1, $2, $3)`;
const BODY = Buffer.from(JSON.stringify({ ok: true, key: 'k-00000000', amount: 42 }));
const HEADERS = JSON.stringify([['content-type', 'application/json']]);

/** `text` with `pattern` cut; throws when it is not there (the SQL changed under us). */
function without(text, pattern) {
  const out = text.replace(pattern, '');
  if (out === text) throw new Error(`pg-round: ${pattern} not found: update the variant`);
  return out;
}

/** The statements of one request of `variant` for key `id`; 'WRITE' stands for the route's write. */
function statements(variant, id) {
  if (variant === 'plain') return ['BEGIN', 'WRITE', 'COMMIT'];
  const first = claim('bench', id, FP, RETENTION_MS);
  const store = sql.storeAndCommit('bench', id, 201, HEADERS, BODY, false);
  switch (variant) {
    case 'once':
      return [first, 'WRITE', store];
    case 'no-read':
      return [without(first, /; SELECT status, [^;]*/), 'WRITE', store];
    case 'no-store':
      return [first, 'WRITE', 'COMMIT'];
    case 'no-sp':
      return [without(first, /; SAVEPOINT once_http_handler$/), 'WRITE', store];
    case 'claim':
      return [
        without(without(first, /; SELECT status, [^;]*/), /; SAVEPOINT once_http_handler$/),
        'WRITE',
        'COMMIT',
      ];
    case 'replay':
      return [first, 'ROLLBACK'];
  }
  throw new Error(variant);
}

function backendTicks(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}

const client = new pg.Client({ connectionString: DB_URL });
await client.connect();
const pid = (await client.query('SELECT pg_backend_pid() AS p')).rows[0].p;

/** One run of `variant`; `rep` names its keys (a replay run replays the keys of once's run of the rep). */
async function run(variant, rep) {
  const prefix = variant === 'replay' ? `once-${rep}` : `${variant}-${rep}`;
  const load0 = os.loadavg()[0];
  const b0 = backendTicks(pid);
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const id = `acct/${prefix}-${i}`;
    for (const s of statements(variant, id)) {
      if (s === 'WRITE') await client.query(EFFECT, [id, 'acct', i]);
      else await client.query(s);
    }
  }
  const secs = (performance.now() - t0) / 1000;
  return {
    reqPerSec: N / secs,
    backendUsPerReq: ((backendTicks(pid) - b0) * 10_000) / N,
    loadavg: (load0 + os.loadavg()[0]) / 2,
  };
}

const VARIANTS = ['plain', 'once', 'no-read', 'no-store', 'no-sp', 'claim'];
const runs = Object.fromEntries([...VARIANTS, 'replay'].map((v) => [v, []]));
console.log(`http pg-round: ${N} requests per run, ${REPS} repetitions, one connection`);
for (const v of VARIANTS) await run(v, 'warm');
for (let r = 0; r < REPS; r++) {
  const order = VARIANTS.slice(r % VARIANTS.length).concat(VARIANTS.slice(0, r % VARIANTS.length));
  for (const v of order) {
    runs[v].push(await run(v, r));
    if (v === 'once') runs.replay.push(await run('replay', r));
  }
  console.log(
    `  rep ${r + 1}: ${[...VARIANTS, 'replay'].map((v) => `${v} ${runs[v].at(-1).backendUsPerReq.toFixed(0)}`).join(', ')} µs backend CPU/req, load ${runs.once.at(-1).loadavg.toFixed(1)}`,
  );
}
const results = [...VARIANTS, 'replay'].map((v) => ({
  variant: v,
  reqPerSec: median(runs[v].map((x) => x.reqPerSec)),
  backendUsPerReq: median(runs[v].map((x) => x.backendUsPerReq)),
  loadavg: median(runs[v].map((x) => x.loadavg)),
  cpuRatioToPlain: pairedRatio(runs[v], runs.plain, (x) => x.backendUsPerReq),
  cpuRatioToOnce: pairedRatio(runs[v], runs.once, (x) => x.backendUsPerReq),
}));
console.log('\n  variant    req/s  backend µs/req  ÷ plain               ÷ once                load');
for (const t of results)
  console.log(
    `  ${t.variant.padEnd(9)} ${t.reqPerSec.toFixed(0).padStart(6)} ${t.backendUsPerReq.toFixed(0).padStart(15)}  ${fmtRatio(t.cpuRatioToPlain).padEnd(20)}  ${fmtRatio(t.cpuRatioToOnce).padEnd(20)}  ${t.loadavg.toFixed(1)}`,
  );
// Part 2: the SQL alone at c = 16.
const C16_N = Number(process.env.BENCH_C16_N ?? 2000);
const pool = new pg.Pool({ connectionString: DB_URL, max: 16 });
async function one(variant, id) {
  const c = await pool.connect();
  try {
    for (const s of statements(variant, id)) {
      if (s === 'WRITE') await c.query(EFFECT, [id, 'acct', 1]);
      else await c.query(s);
    }
  } finally {
    c.release();
  }
}
async function burst(variant, rep) {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < C16_N) await one(variant, `acct/${variant}-c16-${rep}-${next++}`);
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return {
    reqPerSec: C16_N / ((performance.now() - t0) / 1000),
    nodeUsPerReq: (cpu.user + cpu.system) / C16_N,
  };
}
const c16 = { plain: [], once: [] };
await burst('plain', 'warm');
await burst('once', 'warm');
for (let r = 0; r < REPS; r++)
  for (const v of r % 2 ? ['once', 'plain'] : ['plain', 'once']) c16[v].push(await burst(v, r));
const sqlOnly = {
  plain: {
    reqPerSec: median(c16.plain.map((x) => x.reqPerSec)),
    nodeUsPerReq: median(c16.plain.map((x) => x.nodeUsPerReq)),
  },
  once: {
    reqPerSec: median(c16.once.map((x) => x.reqPerSec)),
    nodeUsPerReq: median(c16.once.map((x) => x.nodeUsPerReq)),
  },
  onceOverPlain: pairedRatio(c16.once, c16.plain, (x) => x.reqPerSec),
  loadavg: os.loadavg()[0],
};
await pool.end();
console.log(
  `\n  the SQL alone at c=16: plain ${sqlOnly.plain.reqPerSec.toFixed(0)} req/s (Node ${sqlOnly.plain.nodeUsPerReq.toFixed(0)} µs/req), once ${sqlOnly.once.reqPerSec.toFixed(0)} req/s (Node ${sqlOnly.once.nodeUsPerReq.toFixed(0)} µs/req); once ÷ plain ${fmtRatio(sqlOnly.onceOverPlain)}, load ${sqlOnly.loadavg.toFixed(1)}`,
);
const file = process.env.BENCH_OUT ?? new URL('../results/http-pg-round.json', import.meta.url);
writeFileSync(
  file,
  `${JSON.stringify({ at: new Date().toISOString(), commit: gitCommit(), machine: machine(), requests: N, reps: REPS, results, runs, sqlOnly, c16 }, null, 2)}\n`,
);
await client.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await client.end();
