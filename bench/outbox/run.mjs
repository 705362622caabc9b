// Outbox relay benchmark (issue #14, step 3), per broker (Kafka, RabbitMQ, SQS on ElasticMQ, NATS
// JetStream). For each key spread (BENCH_KEYS_LIST, default 1000,10,0 — 0 is rows without a key)
// and each repetition, the variants run interleaved (their order rotates per repetition):
//   raw      the broker publisher alone, the same object the relays use, calls of BENCH_BATCH
//            messages one after another, no outbox: every ratio's denominator, paired per repetition.
//   relay×N/cC  a backlog of BENCH_ROWS outbox rows drained by N relays (each on its own pool, as
//            separate processes would be), each running C rounds at once (`concurrency`); rows/s
//            from start to the last row committed `sent`. c1 is one round at a time (the relay
//            before `concurrency`); the other variants use the default.
//   relay×N/cC/del  the same with `sentRetentionMs: 0`: a confirmed row is deleted by the
//            statement that would mark it sent (no sent rows kept), which costs PostgreSQL about
//            half as much per row (bench/outbox/pg-round.mjs).
// Each relay run counts the distinct rows marked sent (for /del: deleted; must be all) and the
// duplicate publishes (the same id confirmed twice; 0 without faults). Figures: the median of per-repetition paired
// ratios (variant ÷ raw) over BENCH_REPS (default 7) repetitions, with min–max.
// Sizes: BENCH_ROWS (default 2000; at 10 keys BENCH_ROWS_FEW_KEYS, default 300, since only ten
// rows can be in flight at once), BENCH_BATCH 100, BENCH_ONLY=kafka,rabbitmq,sqs,nats.
// Writes bench/results/outbox.json (BENCH_OUT to change).
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { createRelay, migrate } from '@once/core';
import pg from 'pg';
import { cpuBetween, cpuSnapshot } from '../support/proc-cpu.mjs';
import { fmtRatio, gitCommit, median, pairedRatio } from '../support/report.mjs';
import { makeTarget } from './targets.mjs';

const ROWS = Number(process.env.BENCH_ROWS ?? 2_000);
const ROWS_FEW_KEYS = Number(process.env.BENCH_ROWS_FEW_KEYS ?? 300);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const REPS = Number(process.env.BENCH_REPS ?? 7);
const KEYS_LIST = (process.env.BENCH_KEYS_LIST ?? '1000,10,0').split(',').map(Number);
const ONLY = (process.env.BENCH_ONLY ?? 'kafka,rabbitmq,sqs,nats').split(',');
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const OUT = process.env.BENCH_OUT ?? new URL('../results/outbox.json', import.meta.url);
const RUN = `bench-outbox-${process.pid}`;
/** The commit measured: taken at start (a commit made while the bench runs is not what it loaded). */
const COMMIT = gitCommit();
/** The relay's default `concurrency` (DEFAULT_RELAY_CONCURRENCY in relay-options.ts). */
const C = Number(process.env.BENCH_CONCURRENCY ?? 2);
/** [name, relays, rounds per relay, the relays' sentRetentionMs (undefined: the default)]. */
const VARIANTS = [
  ['relay×1/c1', 1, 1],
  [`relay×1/c${C}`, 1, C],
  ['relay×1/c4', 1, 4],
  [`relay×2/c${C}`, 2, C],
  [`relay×4/c${C}`, 4, C],
  [`relay×1/c${C}/del`, 1, C, 0],
  [`relay×4/c${C}/del`, 4, C, 0],
];

const pool = new pg.Pool({ connectionString: DB_URL, max: 3 });
pool.on('error', () => {});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pad = 'x'.repeat(200);
const body = (i) => Buffer.from(JSON.stringify({ i, pad }));
const destinationOf = (target, keys) => target.destinationFor?.(keys) ?? target.destination;
const keyOf = (keys, i) => (keys === 0 ? undefined : `k${i % keys}`);

/** The broker's own rate: the same publisher, calls of BATCH messages in sequence, no outbox. */
async function raw(target, rows, keys, rep) {
  const destination = destinationOf(target, keys);
  const cpu0 = cpuSnapshot();
  const t0 = performance.now();
  for (let i = 0; i < rows; i += BATCH) {
    const messages = [];
    for (let j = i; j < Math.min(i + BATCH, rows); j++) {
      messages.push({
        id: `${RUN}-raw-${keys}-${rep}-${j}`,
        destination,
        key: keyOf(keys, j),
        body: body(j),
        headers: {},
      });
    }
    const out = await target.publisher.publish(messages);
    if (out?.some((r) => !r.ok))
      throw new Error(`raw publish failed: ${JSON.stringify(out.find((r) => !r.ok))}`);
  }
  const ms = performance.now() - t0;
  return { rate: rows / (ms / 1000), cpu: cpuBetween(cpu0, cpuSnapshot()) };
}

/**
 * The backlog, written straight into the outbox table in one statement (the bench measures the
 * relay, not enqueue): rows in seq order cycle through the keys, as one enqueue per row would.
 */
async function fill(schema, destination, rows, keys) {
  await pool.query(`TRUNCATE ${schema}.outbox`);
  await pool.query(
    `INSERT INTO ${schema}.outbox (destination, key, body)
       SELECT $1, CASE WHEN $3::int = 0 THEN NULL ELSE 'k' || (i % greatest($3::int, 1)) END,
              convert_to(json_build_object('i', i, 'pad', $4::text)::text, 'UTF8')
       FROM generate_series(0, $2::int - 1) AS i ORDER BY i`,
    [destination, rows, keys, pad],
  );
  await pool.query(`ANALYZE ${schema}.outbox`);
}

/** `relays` relays of `rounds` rounds each drain the backlog; rows/s, distinct sent, duplicates. */
async function drain(target, destination, schema, rows, relays, rounds, sentRetentionMs) {
  const confirmed = new Map();
  const publisher = {
    async publish(messages, options) {
      const out = await target.publisher.publish(messages, options);
      if (!out) for (const m of messages) confirmed.set(m.id, (confirmed.get(m.id) ?? 0) + 1);
      else for (const r of out) if (r.ok) confirmed.set(r.id, (confirmed.get(r.id) ?? 0) + 1);
      return out;
    },
  };
  const pools = [];
  const list = [];
  let sent = 0;
  for (let i = 0; i < relays; i++) {
    const p = new pg.Pool({ connectionString: DB_URL, max: rounds });
    p.on('error', () => {});
    pools.push(p);
    const relay = createRelay({
      pool: p,
      schema,
      publishers: { [destination]: publisher },
      batchSize: BATCH,
      concurrency: rounds,
      listen: false,
      pollIntervalMs: 20,
      sentRetentionMs,
    });
    relay.on('outbox:published', ({ count }) => {
      sent += count;
    });
    list.push(relay);
  }
  // Connections opened before the clock starts: a pool's first connect is not the relay's cost.
  await Promise.all(
    pools.map(async (p) => {
      const cs = await Promise.all(Array.from({ length: rounds }, () => p.connect()));
      for (const c of cs) c.release();
    }),
  );
  const cpu0 = cpuSnapshot();
  const t0 = performance.now();
  await Promise.all(list.map((r) => r.start()));
  while (sent < rows) await sleep(2);
  const ms = performance.now() - t0;
  const cpu = cpuBetween(cpu0, cpuSnapshot());
  await Promise.all(list.map((r) => r.stop()));
  await Promise.all(pools.map((p) => p.end()));
  // Rows marked sent, or, where none is kept, rows gone (the backlog was the table's only rows).
  const distinctSent =
    sentRetentionMs === 0
      ? rows - (await pool.query(`SELECT count(*)::int AS n FROM ${schema}.outbox`)).rows[0].n
      : (await pool.query(`SELECT count(*)::int AS n FROM ${schema}.outbox WHERE status = 'sent'`)).rows[0].n;
  let duplicates = 0;
  for (const n of confirmed.values()) duplicates += n - 1;
  return { rate: rows / (ms / 1000), distinctSent, duplicates, cpu };
}

/**
 * CPU µs per row by process group (the median over repetitions of each), and the machine's busy
 * share of its cores over the runs (median); null off Linux.
 */
function cpuPerRow(rs, rows) {
  if (rs.some((r) => !r.cpu)) return null;
  const out = {};
  for (const k of ['node', 'postgres', 'kafka', 'elasticmq', 'rabbitmq', 'nats', 'other', 'busySeconds'])
    out[k === 'busySeconds' ? 'busy' : k] = Math.round(median(rs.map((r) => (r.cpu[k] * 1e6) / rows)));
  out.busyShare = median(rs.map((r) => r.cpu.busyShare));
  return out;
}
const fmtCpu = (c) =>
  c
    ? `CPU µs/row: ${Object.entries(c)
        .filter(([k, v]) => k !== 'busyShare' && v > 0)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}; machine busy ${Math.round(c.busyShare * 100)} %`
    : '';

const results = [];
/** Written after each broker, so a run cut short keeps what it measured. */
function save() {
  writeFileSync(
    OUT,
    `${JSON.stringify(
      {
        bench: 'outbox',
        at: new Date().toISOString(),
        commit: COMMIT,
        machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
        settings: { rows: ROWS, rowsFewKeys: ROWS_FEW_KEYS, batch: BATCH, reps: REPS, defaultConcurrency: C },
        targets: { oneRelay: '≥ 0.5 × raw on every broker', fourRelays1000Keys: '≥ 0.8 × raw' },
        results,
      },
      null,
      2,
    )}\n`,
  );
}

for (const name of ONLY) {
  const target = await makeTarget(name, RUN);
  const schema = `once_bench_outbox_${name}_${process.pid}`;
  try {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await migrate(pool, { schema });
    // Warm-up: a cold broker (ElasticMQ's JIT, a fresh partition) must not weigh on the first pair.
    await raw(target, 500, 0, 'warm');
    for (const keys of KEYS_LIST) {
      const rows = keys > 0 && keys < 100 ? ROWS_FEW_KEYS : ROWS;
      const runs = { raw: [] };
      for (const [v] of VARIANTS) runs[v] = [];
      for (let rep = 0; rep < REPS; rep++) {
        const order = [['raw'], ...VARIANTS];
        const rot = rep % order.length;
        for (const [v, relays, rounds, retention] of [...order.slice(rot), ...order.slice(0, rot)]) {
          await target.reset();
          let r;
          if (v === 'raw') r = await raw(target, rows, keys, rep);
          else {
            const destination = destinationOf(target, keys);
            await fill(schema, destination, rows, keys);
            r = await drain(target, destination, schema, rows, relays, rounds, retention);
          }
          runs[v].push(r);
        }
        console.log(
          `${name} keys=${keys} rep ${rep + 1}/${REPS}: ` +
            Object.entries(runs)
              .map(([v, rs]) => `${v} ${Math.round(rs.at(-1).rate)}`)
              .join(', '),
        );
      }
      const row = {
        broker: name,
        keys,
        rows,
        rawMsgsPerSec: Math.round(median(runs.raw.map((r) => r.rate))),
        rawCpuPerRow: cpuPerRow(runs.raw, rows),
        variants: {},
      };
      for (const [v, relays, rounds] of VARIANTS) {
        const ratio = pairedRatio(runs[v], runs.raw, (r) => r.rate);
        row.variants[v] = {
          relays,
          concurrency: rounds,
          rowsPerSec: Math.round(median(runs[v].map((r) => r.rate))),
          ratio: { median: ratio.median, min: ratio.min, max: ratio.max, reps: ratio.n },
          distinctSent: Math.min(...runs[v].map((r) => r.distinctSent)),
          duplicates: runs[v].reduce((s, r) => s + r.duplicates, 0),
          reps: runs[v].map((r) => Math.round(r.rate)),
          cpuPerRow: cpuPerRow(runs[v], rows),
        };
      }
      row.rawReps = runs.raw.map((r) => Math.round(r.rate));
      results.push(row);
      console.log(`  ${name}, ${keys || 'no'} keys, ${rows} rows; raw ${row.rawMsgsPerSec} msg/s`);
      if (row.rawCpuPerRow) console.log(`    raw ${fmtCpu(row.rawCpuPerRow)}`);
      for (const [v, x] of Object.entries(row.variants)) {
        console.log(
          `    ${v.padEnd(11)} ${String(x.rowsPerSec).padStart(6)} rows/s  ÷ raw ${fmtRatio(x.ratio)}  sent ${x.distinctSent}/${rows}  duplicates ${x.duplicates}`,
        );
        if (x.cpuPerRow) console.log(`      ${fmtCpu(x.cpuPerRow)}`);
      }
    }
    await pool.query(`DROP SCHEMA ${schema} CASCADE`);
    save();
  } finally {
    await target.close();
  }
}
await pool.end();
