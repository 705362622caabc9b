// Core benchmark: what the inbox costs over the same effect without it.
// B1 bare effect (own transaction, no dedup), B2 once per message, B3 once batched (10, 100),
// B4 naive check-then-insert. Interleaved repetitions; median and spread; ratios to baselines.
// Size: BENCH_N messages per run (default 5000; the full size is 50000).
// BENCH_VARIANTS=B2,B3 runs only the variants named by those prefixes, and prints their table:
// no ratios, duplicate cost, storm or results file (those need every variant).
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { createInbox, migrate } from '@once/core';
import pg from 'pg';
import { countingPool } from '../support/counting-pool.mjs';

const N = Number(process.env.BENCH_N ?? 5000);
const REPS = Number(process.env.BENCH_REPS ?? 3);
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
const EFFECT = `INSERT INTO ${SCHEMA}.effects (id, amount) VALUES ($1, $2)`;

let runNo = 0;
const envelope = (id, redelivered = false) => ({
  id,
  body: Buffer.from(`{"amount":7,"id":"${id}"}`),
  headers: {},
  source: { broker: 'bench', queue: 'q' },
  attempt: redelivered ? 2 : 1,
  redelivered,
});

// ---- variants: each returns a function processing one chunk of envelopes
const variants = {
  'B1 bare/msg': { batch: 1, make: () => bare },
  'B1 bare/batch100': { batch: 100, make: () => bare },
  'B2 once/msg': { batch: 1, make: (c) => onceVariant(c, 'optimistic') },
  'B3 once/batch10': { batch: 10, make: (c) => onceVariant(c, 'optimistic') },
  'B3 once/batch100': { batch: 100, make: (c) => onceVariant(c, 'optimistic') },
  'B3s once/batch100 savepoints': { batch: 100, make: (c) => onceVariant(c, 'savepoint') },
  'B4 naive check-then-insert/msg': { batch: 1, make: (c) => naive(c) },
  // Offset fencing: each chunk of 100 is one partition's slice (offsets 0..99), as a Kafka batch
  // is. Run on duplicate-free streams only: a fence takes everything below it for processed.
  'B5 fenced/batch100': { batch: 100, fenced: true, make: (c) => fencedVariant(c) },
};
const ONLY = (process.env.BENCH_VARIANTS ?? '').split(',').filter(Boolean);
for (const name of Object.keys(variants)) {
  if (ONLY.length > 0 && !ONLY.some((p) => name.startsWith(`${p} `))) delete variants[name];
}

async function bare(envs) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    for (const e of envs) await client.query(EFFECT, [e.id, 7]);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

function onceVariant(consumer, batchMode) {
  const inbox = createInbox({
    pool,
    schema: SCHEMA,
    consumer,
    batchMode,
    lockTimeoutMs: 30_000,
    handler: async (e, { tx }) => {
      await tx.query(EFFECT, [e.id, 7]);
    },
  });
  return async (envs) => {
    const outs = envs.length === 1 ? [await inbox.process(envs[0])] : await inbox.processBatch(envs);
    for (const o of outs)
      if (o.status !== 'processed' && o.status !== 'duplicate') throw new Error(`unexpected ${o.status}`);
  };
}

function fencedVariant(consumer) {
  const inbox = createInbox({
    pool,
    schema: SCHEMA,
    consumer,
    lockTimeoutMs: 30_000,
    fenceOf: (e) => ({ stream: 'bench', partition: e.source.partition, offset: e.source.offset }),
    handler: async (e, { tx }) => {
      await tx.query(EFFECT, [e.id, 7]);
    },
  });
  return async (envs) => {
    const placed = envs.map((e) => {
      const i = Number(e.id.slice(e.id.lastIndexOf('-') + 1));
      return { ...e, source: { ...e.source, partition: Math.floor(i / 100), offset: String(i % 100) } };
    });
    const outs = await inbox.processBatch(placed);
    for (const o of outs) if (o.status !== 'processed') throw new Error(`unexpected ${o.status}`);
  };
}

function naive(consumer) {
  return async (envs) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      for (const e of envs) {
        const seen = await client.query(
          `SELECT 1 FROM ${SCHEMA}.naive_seen WHERE consumer = $1 AND message_id = $2`,
          [consumer, e.id],
        );
        if (seen.rowCount === 0) {
          await client.query(EFFECT, [e.id, 7]);
          await client.query(`INSERT INTO ${SCHEMA}.naive_seen VALUES ($1, $2)`, [consumer, e.id]);
        }
      }
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

/** Feeds `envs` in chunks of `batch` to `concurrency` workers; returns rate and latencies. */
async function drive(fn, envs, batch, concurrency) {
  const chunks = [];
  for (let i = 0; i < envs.length; i += batch) chunks.push(envs.slice(i, i + batch));
  const lat = [];
  let next = 0;
  const rt0 = counter.trips;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < chunks.length) {
        const chunk = chunks[next++];
        const s = performance.now();
        await fn(chunk);
        const d = performance.now() - s;
        for (let k = 0; k < chunk.length; k++) lat.push(d);
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
  };
}

/** A fresh stream of N ids; with `dupShare`, that share of the stream are redeliveries of earlier ids. */
function stream(dupShare) {
  const tag = `r${runNo++}`;
  const fresh = Math.round(N * (1 - dupShare));
  const envs = Array.from({ length: fresh }, (_, i) => envelope(`${tag}-${i}`));
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
// Warm-up: a short run of every variant.
for (const [name, v] of Object.entries(variants))
  await drive(v.make(`warm-${name}`), stream(0).slice(0, 500), v.batch, 4);

for (const dupShare of [0, 0.3]) {
  for (const c of CONCURRENCY) {
    const reps = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
    for (let r = 0; r < REPS; r++) {
      // Interleave: every variant once per repetition, in a rotating order.
      const names = Object.keys(variants);
      const order = names.slice(r % names.length).concat(names.slice(0, r % names.length));
      for (const name of order) {
        const v = variants[name];
        if (v.fenced && dupShare > 0) continue;
        reps[name].push(await drive(v.make(`${name}-${runNo}`), stream(dupShare), v.batch, c));
        sample();
      }
    }
    for (const [name, runs] of Object.entries(reps)) {
      if (runs.length === 0) continue;
      const rates = runs.map((x) => x.rate);
      results.push({
        variant: name,
        concurrency: c,
        duplicates: dupShare,
        msgsPerSec: median(rates),
        spread: spread(rates),
        p50Ms: median(runs.map((x) => x.p50)),
        p99Ms: median(runs.map((x) => x.p99)),
        roundTripsPerMsg: median(runs.map((x) => x.rtPerMsg)),
        cpuUsPerMsg: median(runs.map((x) => x.cpuUsPerMsg)),
      });
    }
  }
}

const printTable = () => {
  console.log(
    '\nvariant                          conc dup%    msgs/s  spread  p50ms  p99ms  RT/msg  CPUµs/msg',
  );
  for (const r of results) {
    console.log(
      `${r.variant.padEnd(32)} ${String(r.concurrency).padStart(4)} ${String(r.duplicates * 100).padStart(4)} ${r.msgsPerSec
        .toFixed(0)
        .padStart(9)} ${(r.spread * 100).toFixed(0).padStart(6)}% ${r.p50Ms.toFixed(2).padStart(6)} ${r.p99Ms
        .toFixed(2)
        .padStart(6)} ${r.roundTripsPerMsg.toFixed(2).padStart(7)} ${r.cpuUsPerMsg.toFixed(0).padStart(10)}`,
    );
  }
};
if (ONLY.length > 0) {
  printTable();
  await raw.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
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

const get = (v, c, d = 0) =>
  results.find((r) => r.variant === v && r.concurrency === c && r.duplicates === d);
printTable();
const ratios = [];
for (const c of CONCURRENCY) {
  const ratio = (a, b, target, label) => {
    const x = get(a, c).msgsPerSec / get(b, c).msgsPerSec;
    ratios.push({ concurrency: c, label, ratio: x, target, met: x >= target });
  };
  ratio('B2 once/msg', 'B1 bare/msg', 0.75, 'B2 / B1 per message');
  ratio('B3 once/batch100', 'B1 bare/batch100', 0.8, 'B3(100) / B1 batched(100)');
  ratio('B3 once/batch100', 'B2 once/msg', 3.5, 'B3(100) / B2');
  ratio('B3 once/batch100', 'B3s once/batch100 savepoints', 1, 'optimistic / savepoint batch (100)');
  ratio('B4 naive check-then-insert/msg', 'B1 bare/msg', 0, 'B4 naive / B1 per message');
  ratio('B5 fenced/batch100', 'B3 once/batch100', 0, 'fenced / inbox batch (100)');
  ratio('B5 fenced/batch100', 'B1 bare/batch100', 0.8, 'fenced(100) / B1 batched(100)');
}
console.log('\nratios (median msgs/s; targets from the issue)');
for (const r of ratios) {
  console.log(
    `  c=${String(r.concurrency).padStart(2)} ${r.label.padEnd(38)} ${r.ratio.toFixed(2)}×  target ≥ ${r.target}  ${r.met ? 'met' : 'NOT met'}`,
  );
}
const dupCost = firstRun.rate / dupRun.rate;
console.log(
  `\nredelivered duplicate cost / first delivery (c=1): ${dupCost.toFixed(2)}× (target ≤ 0.5): ` +
    `${firstRun.rate.toFixed(0)} vs ${dupRun.rate.toFixed(0)} msgs/s; RT ${firstRun.rtPerMsg.toFixed(2)} vs ${dupRun.rtPerMsg.toFixed(2)}`,
);
console.log(
  `duplicate storm (500 ids × 20 copies, c=16): extra effects naive=${naiveExtra}, once=${onceExtra}`,
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
      machine: {
        cpus: os.cpus().length,
        model: os.cpus()[0]?.model,
        memGiB: Math.round(os.totalmem() / 2 ** 30),
        node: process.version,
      },
      results,
      ratios,
      duplicateCost: { ratio: dupCost, firstPerSec: firstRun.rate, duplicatePerSec: dupRun.rate },
      storm: { naiveExtraEffects: naiveExtra, onceExtraEffects: onceExtra },
      rss: { peakMiB: peakRss / 2 ** 20, changeMiB: growth },
    },
    null,
    2,
  )}\n`,
);
await raw.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
await raw.end();
