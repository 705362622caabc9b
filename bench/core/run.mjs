// Core benchmark: what the inbox costs over the same effect without it.
// B1 bare effect (own transaction, no dedup), F the floor (bench/support/floor.mjs: a frozen
// hand-written inbox), B2 once per message, B3 once batched (10, 100), B4 naive check-then-insert
// (B5, offset fencing, went with fencing in issue #28). Fk, B2k, B3k: the floor and once with an
// effect table that has a primary key (reported beside the index-less figures, not instead). Interleaved repetitions; per variant the
// median and spread; ratios as the median of per-repetition paired ratios with min–max.
// Two stream shapes: clean, and faults (5 % of messages fail transiently once, 5 % redelivered
// duplicates). pgbench runs of the floor's SQL and of once's own per-message SQL follow.
// Size: BENCH_N messages per run (default 5000; the full size is 50000), BENCH_REPS
// (default 7), BENCH_CONCURRENCY (1,4,16), BENCH_PGBENCH_SECONDS per pgbench run (default 10; 0 skips),
// BENCH_WARM_MSG / BENCH_WARM_BATCH the warm-up per variant (see below).
// BENCH_VARIANTS=B2,B3 runs only the variants named by those prefixes, and prints their table:
// no ratios, duplicate cost, storm, pgbench or results file (those need every variant).
// BENCH_CORE_BEFORE=path of an older build's packages/core/dist/index.js adds B2/B3 variants run on
// that build ("B2 before/msg", …; its tables in schema once_bench_before), interleaved with the
// others, and prints the paired ratios of this build's CPU µs and msgs/s over the older one's.
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { createInbox, migrate } from '@once/core';
import pg from 'pg';
import { countingPool } from '../support/counting-pool.mjs';
import { bareTransaction } from '../support/faults.mjs';
import { createFloorTable, floorBatch, floorOne, floorPgbenchScript } from '../support/floor.mjs';
import { oncePgbenchScript, runPgbench } from '../support/once-pgbench.mjs';
import { fmtRatio, gitCommit, pairedRatio } from '../support/report.mjs';

const N = Number(process.env.BENCH_N ?? 5000);
const REPS = Number(process.env.BENCH_REPS ?? 7);
const PGBENCH_SECONDS = Number(process.env.BENCH_PGBENCH_SECONDS ?? 10);
const PGBENCH_ROUNDS = Number(process.env.BENCH_PGBENCH_ROUNDS ?? 3);
const WARM_MSG = Number(process.env.BENCH_WARM_MSG ?? 5000);
const WARM_BATCH = Number(process.env.BENCH_WARM_BATCH ?? 20000);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? '1,4,16').split(',').map(Number);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = 'once_bench';

const raw = new pg.Pool({ connectionString: DB_URL, max: 20 });
raw.on('error', () => {});
const { pool, counter } = countingPool(raw);

await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(raw, { schema: SCHEMA });
await raw.query(`CREATE TABLE ${SCHEMA}.effects (id text NOT NULL, amount int NOT NULL)`);
await raw.query(`CREATE TABLE ${SCHEMA}.naive_seen (consumer text, message_id text)`);
await raw.query(`CREATE INDEX ON ${SCHEMA}.naive_seen (consumer, message_id)`);
await raw.query(`CREATE TABLE ${SCHEMA}.effects_pk (id text PRIMARY KEY, amount int NOT NULL)`);
await createFloorTable(raw, SCHEMA);
const BEFORE = process.env.BENCH_CORE_BEFORE;
const SCHEMA_BEFORE = 'once_bench_before';
const before = BEFORE ? await import(new URL(BEFORE, `file://${process.cwd()}/`).href) : undefined;
if (before) {
  await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA_BEFORE} CASCADE`);
  await before.migrate(raw, { schema: SCHEMA_BEFORE });
}
const EFFECT = `INSERT INTO ${SCHEMA}.effects (id, amount) VALUES ($1, $2)`;
const EFFECT_PK = `INSERT INTO ${SCHEMA}.effects_pk (id, amount) VALUES ($1, $2)`;

// Transient failures: the ids in `failNext` fail once, after their effect ran (so the transaction
// has to be rolled back), in every variant alike; the bench then redelivers them.
const failNext = new Set();
async function effect(q, e, sql = EFFECT) {
  await q.query(sql, [e.id, 7]);
  if (failNext.delete(e.id)) throw new Error('bench: transient failure');
}
const redeliver = (e) => ({ ...e, attempt: e.attempt + 1, redelivered: true });

let runNo = 0;
const envelope = (id, redelivered = false) => ({
  id,
  body: Buffer.from(`{"amount":7,"id":"${id}"}`),
  headers: {},
  source: { broker: 'bench', queue: 'q' },
  attempt: redelivered ? 2 : 1,
  redelivered,
});

// ---- variants: each returns a function processing one chunk of envelopes, which returns the
// envelopes to redeliver (after a transient failure) or nothing.
const variants = {
  'B1 bare/msg': { batch: 1, make: () => bare },
  'B1 bare/batch100': { batch: 100, make: () => bare },
  'F floor/msg': { batch: 1, make: (c) => floor(c, EFFECT) },
  'F floor/batch100': { batch: 100, make: (c) => floor(c, EFFECT) },
  'B2 once/msg': { batch: 1, make: (c) => onceVariant(c, 'optimistic') },
  'B3 once/batch10': { batch: 10, make: (c) => onceVariant(c, 'optimistic') },
  'B3 once/batch100': { batch: 100, make: (c) => onceVariant(c, 'optimistic') },
  'Fk floor pk/msg': { batch: 1, make: (c) => floor(c, EFFECT_PK) },
  'Fk floor pk/batch100': { batch: 100, make: (c) => floor(c, EFFECT_PK) },
  'B2k once pk/msg': { batch: 1, make: (c) => onceVariant(c, 'optimistic', EFFECT_PK) },
  'B3k once pk/batch100': { batch: 100, make: (c) => onceVariant(c, 'optimistic', EFFECT_PK) },
  'B3s once/batch100 savepoints': { batch: 100, make: (c) => onceVariant(c, 'savepoint') },
  'B4 naive check-then-insert/msg': { batch: 1, make: (c) => naive(c) },
  ...(before && {
    'B2 before/msg': { batch: 1, make: (c) => onceVariant(c, 'optimistic', EFFECT, before) },
    'B3 before/batch10': { batch: 10, make: (c) => onceVariant(c, 'optimistic', EFFECT, before) },
    'B3 before/batch100': { batch: 100, make: (c) => onceVariant(c, 'optimistic', EFFECT, before) },
  }),
};
const ONLY = (process.env.BENCH_VARIANTS ?? '').split(',').filter(Boolean);
for (const name of Object.keys(variants)) {
  if (ONLY.length > 0 && !ONLY.some((p) => name.startsWith(`${p} `))) delete variants[name];
}

/** Runs `body(client)` in a transaction; on an error rolls back and returns `envs` for redelivery. */
async function inTx(envs, body) {
  try {
    await bareTransaction(pool, body);
  } catch (err) {
    if (!String(err?.message).startsWith('bench:')) throw err;
    return envs.map(redeliver);
  }
}

async function bare(envs) {
  return inTx(envs, async (client) => {
    for (const e of envs) await effect(client, e);
  });
}

/** The floor: its claim and transaction are bench/support/floor.mjs's; a failed batch is redelivered whole. */
function floor(consumer, sql) {
  return async (envs) => {
    try {
      if (envs.length === 1)
        await floorOne(pool, SCHEMA, consumer, envs[0].id, (q) => effect(q, envs[0], sql));
      else
        await floorBatch(
          pool,
          SCHEMA,
          consumer,
          envs,
          (e) => e.id,
          (q, e) => effect(q, e, sql),
        );
    } catch (err) {
      if (!String(err?.message).startsWith('bench:')) throw err;
      return envs.map(redeliver);
    }
  };
}

function onceVariant(consumer, batchMode, sql = EFFECT, build = undefined) {
  const inbox = (build?.createInbox ?? createInbox)({
    pool,
    schema: build ? SCHEMA_BEFORE : SCHEMA,
    consumer,
    batchMode,
    lockTimeoutMs: 30_000,
    handler: async (e, { tx }) => {
      await effect(tx, e, sql);
    },
  });
  return async (envs) => {
    const outs = envs.length === 1 ? [await inbox.process(envs[0])] : await inbox.processBatch(envs);
    const again = [];
    for (const o of outs) {
      // Only an attempt that counted is charged, as the adapters do (a broker's own count aside).
      if (o.status === 'retry') again.push(o.spent ? redeliver(o.envelope) : o.envelope);
      else if (o.status === 'not-run' || o.status === 'busy') again.push(o.envelope);
      else if (o.status !== 'processed' && o.status !== 'duplicate')
        throw new Error(`unexpected ${o.status} ${o.reason ?? ''} ${o.error?.message ?? ''}`);
    }
    return again;
  };
}

function naive(consumer) {
  return (envs) =>
    inTx(envs, async (client) => {
      for (const e of envs) {
        const seen = await client.query(
          `SELECT 1 FROM ${SCHEMA}.naive_seen WHERE consumer = $1 AND message_id = $2`,
          [consumer, e.id],
        );
        if (seen.rowCount === 0) {
          await effect(client, e);
          await client.query(`INSERT INTO ${SCHEMA}.naive_seen VALUES ($1, $2)`, [consumer, e.id]);
        }
      }
    });
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

/**
 * Feeds `envs` in chunks of `batch` to `concurrency` workers; what a chunk hands back is queued
 * again as one more chunk (a redelivery). Returns rate and latencies (a redelivered message's
 * latency is each of its attempts).
 */
async function drive(fn, envs, batch, concurrency) {
  const chunks = [];
  for (let i = 0; i < envs.length; i += batch) chunks.push(envs.slice(i, i + batch));
  const lat = [];
  let next = 0;
  let redelivered = 0;
  const rt0 = counter.trips;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < chunks.length) {
        const chunk = chunks[next++];
        const s = performance.now();
        const again = await fn(chunk);
        const d = performance.now() - s;
        for (let k = 0; k < chunk.length; k++) lat.push(d);
        if (again?.length) {
          redelivered += again.length;
          chunks.push(again);
        }
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  lat.sort((a, b) => a - b);
  return {
    rate: envs.length / secs,
    p50: pct(lat, 50),
    p99: pct(lat, 99),
    rtPerMsg: (counter.trips - rt0) / envs.length,
    cpuUsPerMsg: (cpu.user + cpu.system) / envs.length,
    redelivered,
  };
}

/**
 * A fresh stream of N ids; with `dupShare`, that share of the stream are redeliveries of earlier
 * ids; with `failShare`, that share of the fresh ids fail once (transiently) when first processed.
 */
function stream(dupShare, failShare = 0) {
  const tag = `r${runNo++}`;
  const fresh = Math.round(N * (1 - dupShare));
  const envs = Array.from({ length: fresh }, (_, i) => envelope(`${tag}-${i}`));
  for (const e of envs) if (Math.random() < failShare) failNext.add(e.id);
  const out = [];
  let j = 0;
  for (let i = 0; i < N; i++) {
    if (dupShare > 0 && i > 0 && (out.length - j >= fresh || (Math.random() < dupShare && j < out.length))) {
      out.push(envelope(out[Math.floor(Math.random() * out.length)].id, true));
    } else out.push(envs[j++] ?? envelope(`${tag}-x${i}`));
  }
  return out;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const spread = (xs) => (Math.max(...xs) - Math.min(...xs)) / median(xs);

const results = [];
let peakRss = 0;
const rssSamples = [];
const sample = () => {
  const r = process.memoryUsage().rss;
  peakRss = Math.max(peakRss, r);
  rssSamples.push(r);
};

console.log(
  `core bench: N=${N} per run, ${REPS} interleaved repetitions, concurrency ${CONCURRENCY.join('/')}`,
);
console.log(
  `machine: ${os.cpus().length} × ${os.cpus()[0]?.model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}`,
);
// Warm-up: every variant runs BENCH_WARM_MSG messages (default 5000) one at a time, or
// BENCH_WARM_BATCH (default 20000) batched, before anything is measured. `process.cpuUsage()`
// counts V8's compiler threads: with a short warm-up, part of a variant's measured CPU is its code
// still being compiled, which weighs on the larger code (once) more than on the floor
// (docs/history/benchmarks-issue-14.md, "Second round").
for (const [name, v] of Object.entries(variants)) {
  const n = v.batch > 1 ? WARM_BATCH : WARM_MSG;
  const envs = Array.from({ length: n }, (_, i) => envelope(`warm-${name}-${i}`));
  await drive(v.make(`warm-${name}`), envs, v.batch, 4);
}

// The clean stream, and beside it the faulty one (5 % transient failures, 5 % duplicates).
const MODES = [
  { mode: 'clean', dupShare: 0, failShare: 0 },
  { mode: 'faults', dupShare: 0.05, failShare: 0.05 },
];
const repRuns = {}; // `${mode} ${c} ${variant}` → the runs of each repetition, in order
for (const { mode, dupShare, failShare } of MODES) {
  for (const c of CONCURRENCY) {
    const reps = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
    for (let r = 0; r < REPS; r++) {
      // Interleave: every variant once per repetition, in a rotating order.
      const names = Object.keys(variants);
      const order = names.slice(r % names.length).concat(names.slice(0, r % names.length));
      for (const name of order) {
        const v = variants[name];
        reps[name].push(await drive(v.make(`${name}-${runNo}`), stream(dupShare, failShare), v.batch, c));
        sample();
      }
    }
    for (const [name, runs] of Object.entries(reps)) {
      if (runs.length === 0) continue;
      repRuns[`${mode} ${c} ${name}`] = runs;
      const rates = runs.map((x) => x.rate);
      results.push({
        variant: name,
        concurrency: c,
        mode,
        duplicates: dupShare,
        failures: failShare,
        msgsPerSec: median(rates),
        spread: spread(rates),
        p50Ms: median(runs.map((x) => x.p50)),
        p99Ms: median(runs.map((x) => x.p99)),
        roundTripsPerMsg: median(runs.map((x) => x.rtPerMsg)),
        cpuUsPerMsg: median(runs.map((x) => x.cpuUsPerMsg)),
        redeliveredPerRun: median(runs.map((x) => x.redelivered)),
        repMsgsPerSec: rates.map(Math.round),
        repCpuUsPerMsg: runs.map((x) => Math.round(x.cpuUsPerMsg)),
      });
    }
  }
}

const printTable = () => {
  console.log(
    '\nvariant                          conc mode      msgs/s  spread  p50ms  p99ms  RT/msg  CPUµs/msg',
  );
  for (const r of results) {
    console.log(
      `${r.variant.padEnd(32)} ${String(r.concurrency).padStart(4)} ${r.mode.padEnd(6)} ${r.msgsPerSec
        .toFixed(0)
        .padStart(9)} ${(r.spread * 100).toFixed(0).padStart(6)}% ${r.p50Ms.toFixed(2).padStart(6)} ${r.p99Ms
        .toFixed(2)
        .padStart(6)} ${r.roundTripsPerMsg.toFixed(2).padStart(7)} ${r.cpuUsPerMsg.toFixed(0).padStart(10)}`,
    );
  }
};
/** This build over the older one (BENCH_CORE_BEFORE), per stream and concurrency, paired. */
const printBefore = () => {
  if (!before) return;
  console.log(`\nthis build ÷ ${BEFORE}: median of ${REPS} paired repetitions [min–max]`);
  for (const { mode } of MODES) {
    for (const c of CONCURRENCY) {
      for (const [now, old] of [
        ['B2 once/msg', 'B2 before/msg'],
        ['B3 once/batch10', 'B3 before/batch10'],
        ['B3 once/batch100', 'B3 before/batch100'],
      ]) {
        const a = repRuns[`${mode} ${c} ${now}`];
        const b = repRuns[`${mode} ${c} ${old}`];
        if (!a || !b) continue;
        const cpu = fmtRatio(pairedRatio(a, b, (x) => x.cpuUsPerMsg));
        const rate = fmtRatio(pairedRatio(a, b, (x) => x.rate));
        console.log(
          `  ${mode.padEnd(6)} c=${String(c).padStart(2)} ${now.padEnd(18)} CPU µs ${cpu.padEnd(20)} msgs/s ${rate}`,
        );
      }
    }
  }
};
if (ONLY.length > 0) {
  printTable();
  printBefore();
  await raw.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
  if (before) await raw.query(`DROP SCHEMA ${SCHEMA_BEFORE} CASCADE`);
  await raw.end();
  process.exit(0);
}

// Cost of a redelivered duplicate vs a first delivery, once per message, concurrency 1.
const dupInbox = onceVariant('dupcost', 'optimistic');
const firsts = stream(0);
const firstRun = await drive(dupInbox, firsts, 1, 1);
const dupRun = await drive(
  dupInbox,
  firsts.map((e) => ({ ...e, attempt: 2, redelivered: true })),
  1,
  1,
);

// Duplicate storm: 500 ids × 20 copies at concurrency 16 → extra effects let through.
async function storm(fn) {
  const tag = `storm${runNo++}`;
  const envs = [];
  for (let i = 0; i < 500; i++) for (let k = 0; k < 20; k++) envs.push(envelope(`${tag}-${i}`));
  await drive(fn, envs, 1, 16);
  const r = await raw.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.effects WHERE id LIKE $1`, [
    `${tag}-%`,
  ]);
  return r.rows[0].n - 500;
}
const naiveExtra = await storm(naive('storm-naive'));
const onceExtra = await storm(onceVariant('storm-once', 'optimistic'));
const floorExtra = await storm(floor('storm-floor', EFFECT));

printTable();
printBefore();
// Every ratio is the median of per-repetition paired ratios, with min–max (bench/support/paired.mjs).
// `cmp` '≥': throughput, higher is better; '≤': Node CPU per message, lower is better.
const ratios = [];
for (const { mode } of MODES) {
  for (const c of CONCURRENCY) {
    const ratio = (a, b, target, label, measure = 'msgsPerSec') => {
      const value = measure === 'msgsPerSec' ? (x) => x.rate : (x) => x.cpuUsPerMsg;
      const r = pairedRatio(repRuns[`${mode} ${c} ${a}`], repRuns[`${mode} ${c} ${b}`], value);
      if (!r) return;
      const cmp = measure === 'msgsPerSec' ? '≥' : '≤';
      const met = target === undefined ? undefined : cmp === '≥' ? r.median >= target : r.median <= target;
      ratios.push({
        mode,
        concurrency: c,
        label,
        measure,
        ratio: r.median,
        min: r.min,
        max: r.max,
        reps: r.n,
        target,
        cmp,
        met,
      });
    };
    ratio('B2 once/msg', 'F floor/msg', 0.95, 'B2 / F (floor) per message');
    ratio('B3 once/batch100', 'F floor/batch100', 0.95, 'B3(100) / F (floor) batched(100)');
    ratio('B2 once/msg', 'F floor/msg', 1.15, 'B2 / F CPU µs per message', 'cpuUsPerMsg');
    ratio('B3 once/batch100', 'F floor/batch100', 1.15, 'B3(100) / F(100) CPU µs per message', 'cpuUsPerMsg');
    ratio('B2k once pk/msg', 'Fk floor pk/msg', undefined, 'B2k / Fk per message, pk effect');
    ratio('B3k once pk/batch100', 'Fk floor pk/batch100', undefined, 'B3k(100) / Fk(100), pk effect');
    ratio('B2 once/msg', 'B1 bare/msg', 0.75, 'B2 / B1 per message');
    ratio('B3 once/batch100', 'B1 bare/batch100', 0.8, 'B3(100) / B1 batched(100)');
    ratio('F floor/msg', 'B1 bare/msg', undefined, 'F (floor) / B1 per message');
    ratio('F floor/batch100', 'B1 bare/batch100', undefined, 'F(100) / B1 batched(100)');
    ratio('B3 once/batch100', 'B2 once/msg', 3.5, 'B3(100) / B2');
    ratio('B3 once/batch100', 'B3s once/batch100 savepoints', 1, 'optimistic / savepoint batch (100)');
    ratio('B4 naive check-then-insert/msg', 'B1 bare/msg', undefined, 'B4 naive / B1 per message');
  }
}
for (const { mode, dupShare, failShare } of MODES) {
  console.log(
    `\nratios, ${mode} stream (${dupShare * 100} % duplicates, ${failShare * 100} % transient failures): median of ${REPS} paired repetitions [min–max]`,
  );
  for (const r of ratios.filter((x) => x.mode === mode)) {
    const verdict = r.target === undefined ? '' : `target ${r.cmp} ${r.target}  ${r.met ? 'met' : 'NOT met'}`;
    console.log(
      `  c=${String(r.concurrency).padStart(2)} ${r.label.padEnd(38)} ${fmtRatio({ median: r.ratio, min: r.min, max: r.max }).padEnd(20)} ${verdict}`,
    );
  }
}

// The floor's SQL and once's own per-message SQL under pgbench (separate processes, simple
// protocol), beside the Node figures: BENCH_PGBENCH_ROUNDS rounds (default 3), each running both
// scripts at every concurrency, their order alternating; per concurrency the median tps of each
// and the median of the rounds' paired ratios once-SQL ÷ floor-SQL (PostgreSQL's part of the gap).
let pgbench = [];
let pgbenchOnce = [];
if (PGBENCH_SECONDS > 0) {
  const PGB = 'once_floor_pgbench';
  const PGO = 'once_sql_pgbench';
  await raw.query(`DROP SCHEMA IF EXISTS ${PGB} CASCADE`);
  await raw.query(`CREATE SCHEMA ${PGB}`);
  await raw.query(`CREATE TABLE ${PGB}.effects (id text NOT NULL, amount int NOT NULL)`);
  await createFloorTable(raw, PGB);
  await raw.query(`DROP SCHEMA IF EXISTS ${PGO} CASCADE`);
  await migrate(raw, { schema: PGO });
  await raw.query(`CREATE TABLE ${PGO}.effects (id text NOT NULL, amount int NOT NULL)`);
  const url = new URL(DB_URL);
  const conn = {
    seconds: PGBENCH_SECONDS,
    host: url.hostname,
    port: url.port || 5432,
    user: decodeURIComponent(url.username) || 'postgres',
    database: url.pathname.slice(1) || 'test',
  };
  const scripts = { floor: floorPgbenchScript(PGB), once: oncePgbenchScript(PGO) };
  const rounds = Object.fromEntries(CONCURRENCY.map((c) => [c, { floor: [], once: [] }]));
  for (let r = 0; r < PGBENCH_ROUNDS; r++)
    for (const c of CONCURRENCY)
      for (const which of r % 2 ? ['once', 'floor'] : ['floor', 'once'])
        rounds[c][which].push(runPgbench(scripts[which], { ...conn, clients: c }));
  await raw.query(`DROP SCHEMA ${PGB} CASCADE`);
  await raw.query(`DROP SCHEMA ${PGO} CASCADE`);
  pgbench = CONCURRENCY.map((c) => ({ clients: c, tps: median(rounds[c].floor), rounds: rounds[c].floor }));
  pgbenchOnce = CONCURRENCY.map((c) => ({
    clients: c,
    tps: median(rounds[c].once),
    rounds: rounds[c].once,
    onceOverFloor: pairedRatio(rounds[c].once, rounds[c].floor, (x) => x),
  }));
  console.log(
    `\npgbench (-M simple, ${PGBENCH_SECONDS} s each, ${PGBENCH_ROUNDS} rounds), the floor's SQL and once's SQL per message, beside the clean runs:`,
  );
  console.log(
    '  conc  floor SQL tx/s  once SQL tx/s  once SQL ÷ floor SQL  F floor/msg  B2 once/msg  B1 bare/msg   (msgs/s, medians)',
  );
  for (const [i, p] of pgbench.entries()) {
    const at = (v) =>
      results.find((r) => r.variant === v && r.concurrency === p.clients && r.mode === 'clean');
    const m = (v) => (at(v)?.msgsPerSec ?? Number.NaN).toFixed(0).padStart(12);
    const o = pgbenchOnce[i];
    console.log(
      `  ${String(p.clients).padStart(4)} ${p.tps.toFixed(0).padStart(15)} ${o.tps.toFixed(0).padStart(14)} ${fmtRatio(o.onceOverFloor).padStart(21)} ${m('F floor/msg')} ${m('B2 once/msg')} ${m('B1 bare/msg')}`,
    );
  }
}
const dupCost = firstRun.rate / dupRun.rate;
console.log(
  `\nredelivered duplicate cost / first delivery (c=1): ${dupCost.toFixed(2)}× (target ≤ 0.5): ` +
    `${firstRun.rate.toFixed(0)} vs ${dupRun.rate.toFixed(0)} msgs/s; RT ${firstRun.rtPerMsg.toFixed(2)} vs ${dupRun.rtPerMsg.toFixed(2)}`,
);
console.log(
  `duplicate storm (500 ids × 20 copies, c=16): extra effects naive=${naiveExtra}, once=${onceExtra}, floor=${floorExtra}`,
);
const growth = (rssSamples.at(-1) - rssSamples[0]) / 2 ** 20;
console.log(
  `peak RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB; RSS change over the run ${growth.toFixed(1)} MiB`,
);

writeFileSync(
  new URL('../results/core.json', import.meta.url),
  `${JSON.stringify(
    {
      at: new Date().toISOString(),
      n: N,
      reps: REPS,
      warmUp: { perMessage: WARM_MSG, batched: WARM_BATCH },
      machine: {
        cpus: os.cpus().length,
        model: os.cpus()[0]?.model,
        memGiB: Math.round(os.totalmem() / 2 ** 30),
        node: process.version,
      },
      results,
      ratios,
      duplicateCost: { ratio: dupCost, firstPerSec: firstRun.rate, duplicatePerSec: dupRun.rate },
      storm: { naiveExtraEffects: naiveExtra, onceExtraEffects: onceExtra, floorExtraEffects: floorExtra },
      pgbenchFloor: { seconds: PGBENCH_SECONDS, protocol: 'simple', rounds: PGBENCH_ROUNDS, runs: pgbench },
      pgbenchOnceSql: {
        seconds: PGBENCH_SECONDS,
        protocol: 'simple',
        rounds: PGBENCH_ROUNDS,
        runs: pgbenchOnce,
      },
      commit: gitCommit(),
      rss: { peakMiB: peakRss / 2 ** 20, changeMiB: growth },
    },
    null,
    2,
  )}\n`,
);
await raw.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
if (before) await raw.query(`DROP SCHEMA ${SCHEMA_BEFORE} CASCADE`);
await raw.end();
