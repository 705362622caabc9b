// Scale bench (issue #14, step 4), opt-in: `npm run bench -- --scale` or `node bench/core/scale.mjs`.
// 1. Loads BENCH_SCALE_ROWS (default 10,000,000) expired inbox rows with random UUID text ids over
//    10 consumers into its own schema, with INSERT … SELECT generate_series, then VACUUM ANALYZE,
//    and prints the primary-key index's size beside `SHOW shared_buffers`.
// 2. Throughput of once on that inbox against the same run on an empty inbox (its own schema),
//    new messages with random UUID ids under the same 10 consumers: per message and batched (100),
//    BENCH_REPS (default 7) interleaved repetitions of BENCH_N messages (default 3000) at
//    BENCH_SCALE_CONCURRENCY (default 4); ratios are medians of per-repetition paired ratios.
// 3. purge() of the loaded rows beside live consumers (BENCH_SCALE_LIVE workers, default 2, once
//    per message, each as fast as it can, or BENCH_SCALE_LIVE_RATE messages a second each, paced:
//    a machine whose consumers use every core shows any extra work in their p99, a paced one
//    shows what the purge does to a consumer with room): for each rate in BENCH_PURGE_RATES (rows/s, default 2000,5600,15000), a window
//    of BENCH_PURGE_WINDOW_S seconds (default 60) without purge, then one with it (BENCH_PURGE_BATCH
//    rows per purge statement, default purge's own; a comma list, e.g. 1000,250,100, runs a pair for
//    each size at each rate, interleaved); the consumers' p50/p99 in each. Then the rest of the rows is purged with no rate limit (for at most
//    BENCH_PURGE_REST_MAX_S, default 900), timed, consumers still running.
//    BENCH_PURGE_PAIRS=K (default 1) runs K window pairs (without, with) per rate, the rates
//    interleaved (rate 1 pair 1, rate 2 pair 1, ..., rate 1 pair 2, ...), so that a slow stretch
//    of a shared machine lands on every rate; per rate the median [min–max] of the pairs' p99
//    ratios.
// BENCH_SCALE_PHASES=load,throughput,purge,rest (the default, all four) runs some of them: a
// purge-only rerun on a quiet machine is BENCH_SCALE_PHASES=purge,rest after a run with
// BENCH_SCALE_KEEP=1, which keeps the loaded schema at the end. A loaded inbox is reused (with or
// without the load phase) when it still holds at least min(5,000,000, BENCH_SCALE_ROWS / 2)
// expired rows, so earlier purge runs may have shrunk it; with fewer, the load phase reloads it and
// a run without the load phase stops and says so. Nothing is re-expired: the rows left are the
// ones the purge windows would have reached next anyway (oldest expiry first).
// BENCH_SCALE_SCHEMA_PREFIX (default once_scale) names the schemas <prefix>_big, <prefix>_empty.
// Each window also records where the live consumers' time goes, by stage (claim, effect, COMMIT,
// Node between them; p50, p99, and the mean over the slowest 1 %), and the server's counters per
// second (WAL, buffers written, checkpoints, the big inbox's blocks read): what the purge changes.
// Results: bench/results/scale.json (BENCH_OUT: another file); a run of some phases replaces only their sections of the file
// there (each section says when it was measured). The schemas are dropped at the end.

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { createInbox, migrate } from '@once/core';
import { purge } from '@once/core/admin';
import pg from 'pg';
import { flushStats, serverSettings } from '../support/pg-server.mjs';
import { fmtRatio, gitCommit, median, pairedRatio } from '../support/report.mjs';

const ROWS = Number(process.env.BENCH_SCALE_ROWS ?? 10_000_000);
const CONSUMERS = 10;
const N = Number(process.env.BENCH_N ?? 3000);
const REPS = Number(process.env.BENCH_REPS ?? 7);
const C = Number(process.env.BENCH_SCALE_CONCURRENCY ?? 4);
const LIVE = Number(process.env.BENCH_SCALE_LIVE ?? 2);
// Messages a second per live worker; 0: as fast as it can (closed loop).
const LIVE_RATE = Number(process.env.BENCH_SCALE_LIVE_RATE ?? 0);
if (!(LIVE_RATE >= 0))
  throw new Error(
    `BENCH_SCALE_LIVE_RATE must be a number >= 0, got ${JSON.stringify(process.env.BENCH_SCALE_LIVE_RATE)}`,
  );
const RATES = (process.env.BENCH_PURGE_RATES ?? '2000,5600,15000').split(',').map(Number).filter(Boolean);
const WINDOW_S = Number(process.env.BENCH_PURGE_WINDOW_S ?? 60);
// Rows per purge statement (purge's batchSize), a comma list to interleave several; unset: purge's
// own default.
const PURGE_BATCHES = (process.env.BENCH_PURGE_BATCH ?? '')
  .split(',')
  .map((b) => b.trim())
  .filter(Boolean)
  .map(Number);
if (PURGE_BATCHES.some((b) => !Number.isInteger(b) || b < 1))
  throw new Error(
    `BENCH_PURGE_BATCH must be whole numbers >= 1, comma-separated, got ${JSON.stringify(process.env.BENCH_PURGE_BATCH)}`,
  );
const BATCH_VARIANTS = PURGE_BATCHES.length ? PURGE_BATCHES : [undefined];
// purge()'s own default rows per statement (packages/core/src/schema/purge.ts), for the record and the baseline.
const PURGE_DEFAULT_BATCH = 5000;
// Which purge runs in the windows: `core` (@once/core's purge), `pkjoin` (the statement purge had
// before 2026-11-24's change, kept here as a baseline: the doomed rows joined back through the
// primary key), `core-walzstd` (@once/core's purge on connections of its own that compress the
// WAL's full-page images, `wal_compression = zstd`: a superuser's session setting; the consumers'
// sessions keep the server's), or several, interleaved.
const KNOWN_IMPLS = ['core', 'pkjoin', 'core-walzstd'];
const PURGE_IMPLS = (process.env.BENCH_PURGE_SQL ?? 'core').split(',').map((s) => s.trim());
for (const impl of PURGE_IMPLS)
  if (!KNOWN_IMPLS.includes(impl))
    throw new Error(`BENCH_PURGE_SQL: unknown ${JSON.stringify(impl)} (known: ${KNOWN_IMPLS.join(', ')})`);
const REST_MAX_S = Number(process.env.BENCH_PURGE_REST_MAX_S ?? 900);
const KEEP = process.env.BENCH_SCALE_KEEP === '1';
const PAIRS = Number(process.env.BENCH_PURGE_PAIRS ?? 1);
const ALL_PHASES = ['load', 'throughput', 'purge', 'rest'];
const PHASES = new Set(
  (process.env.BENCH_SCALE_PHASES ?? ALL_PHASES.join(','))
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean),
);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const PREFIX = process.env.BENCH_SCALE_SCHEMA_PREFIX ?? 'once_scale';
const BIG = `${PREFIX}_big`;
const EMPTY = `${PREFIX}_empty`;
// Enough expired rows to reuse a kept inbox that purge runs have shrunk (see the header).
const REUSE_MIN = Math.min(5_000_000, Math.floor(ROWS / 2));
for (const p of PHASES)
  if (!ALL_PHASES.includes(p))
    throw new Error(
      `BENCH_SCALE_PHASES: unknown phase ${JSON.stringify(p)} (known: ${ALL_PHASES.join(', ')})`,
    );
if (!/^[a-z_][a-z0-9_]*$/.test(PREFIX))
  throw new Error(
    `BENCH_SCALE_SCHEMA_PREFIX must be a lower-case SQL identifier, got ${JSON.stringify(PREFIX)}`,
  );
if (!Number.isInteger(PAIRS) || PAIRS < 1)
  throw new Error(
    `BENCH_PURGE_PAIRS must be a whole number >= 1, got ${JSON.stringify(process.env.BENCH_PURGE_PAIRS)}`,
  );
const CHUNK = 1_000_000;

const pool = new pg.Pool({ connectionString: DB_URL, max: Math.max(C, LIVE) + 2 });
pool.on('error', () => {});
// The live consumers' own pool, its queries timed by stage (the claim with BEGIN, the handler's
// effect, COMMIT): where a slow message spends its time is what says how the purge slows it.
const stages = new AsyncLocalStorage();
const stageOf = (text) =>
  text.startsWith('BEGIN')
    ? 'claim'
    : text === 'COMMIT'
      ? 'commit'
      : text.includes('.effects')
        ? 'effect'
        : 'other';
const livePool = new pg.Pool({ connectionString: DB_URL, max: LIVE });
livePool.on('error', () => {});
livePool.on('connect', (client) => {
  const query = client.query.bind(client);
  client.query = (...args) => {
    const rec = stages.getStore();
    const out = query(...args);
    if (!rec || typeof out?.then !== 'function') return out;
    const t = performance.now();
    const stage = stageOf(typeof args[0] === 'string' ? args[0] : (args[0]?.text ?? ''));
    return out.then((r) => {
      rec[stage] += performance.now() - t;
      return r;
    });
  };
});
const q = async (sql, params) => (await pool.query(sql, params)).rows;
const log = (...a) => console.log(`[${new Date().toISOString().slice(11, 19)}]`, ...a);
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;

log(
  `scale bench: ${ROWS.toLocaleString('en')} rows over ${CONSUMERS} consumers; ${REPS} reps × ${N} msgs at c=${C}; ` +
    `purge rates ${RATES.join(', ')} rows/s, ${PAIRS} pair(s) of ${WINDOW_S} s windows, ${LIVE} live workers${LIVE_RATE > 0 ? ` at ${LIVE_RATE} msgs/s each` : ''}; ` +
    `phases ${ALL_PHASES.filter((p) => PHASES.has(p)).join(', ')}; schemas ${BIG}, ${EMPTY}`,
);

// ---- 1. the large inbox
/** Expired rows in the kept inbox, or -1 if there is none. */
async function expiredRows() {
  const exists = await q(
    `SELECT 1 FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = $1 AND c.relname = 'inbox'`,
    [BIG],
  );
  if (!exists.length) return -1;
  return Number((await q(`SELECT count(*)::bigint AS n FROM ${BIG}.inbox WHERE expires_at < now()`))[0].n);
}
const load = { at: new Date().toISOString(), seconds: 0, reused: false };
const kept = KEEP || !PHASES.has('load') ? await expiredRows() : -1;
if (kept >= REUSE_MIN) {
  load.reused = true;
  load.expiredRowsReused = kept;
  log(
    `reusing ${BIG}: ${kept.toLocaleString('en')} expired rows (at least ${REUSE_MIN.toLocaleString('en')} needed)`,
  );
} else if (!PHASES.has('load')) {
  await pool.end();
  throw new Error(
    `${BIG} has ${kept < 0 ? 'no inbox' : `${kept.toLocaleString('en')} expired rows`}, fewer than the ${REUSE_MIN.toLocaleString('en')} a run without the load phase needs: add load to BENCH_SCALE_PHASES`,
  );
} else {
  await pool.query(`DROP SCHEMA IF EXISTS ${BIG} CASCADE`);
  await migrate(pool, { schema: BIG });
  const t0 = performance.now();
  // Rows as once writes them: a 32-byte fingerprint, status 'done', expired a day ago (spread over
  // ROWS ms in insertion order, so the oldest were written first, as in a real inbox).
  for (let from = 1; from <= ROWS; from += CHUNK) {
    const to = Math.min(ROWS, from + CHUNK - 1);
    await pool.query(
      `INSERT INTO ${BIG}.inbox (consumer, message_id, fingerprint, status, created_at, expires_at)
       SELECT 'scale-' || (g % ${CONSUMERS}), gen_random_uuid()::text, sha256(int8send(g)), 'done',
              now() - interval '8 days' + g * interval '1 millisecond', now() - interval '1 day' + g * interval '1 millisecond' - interval '${ROWS} milliseconds'
       FROM generate_series($1::bigint, $2::bigint) AS g`,
      [from, to],
    );
    log(`  loaded ${to.toLocaleString('en')} rows (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  }
  const tv = performance.now();
  await pool.query(`VACUUM ANALYZE ${BIG}.inbox`);
  load.seconds = (performance.now() - t0) / 1000;
  load.vacuumSeconds = (performance.now() - tv) / 1000;
  log(`load ${load.seconds.toFixed(0)} s including VACUUM ANALYZE (${load.vacuumSeconds.toFixed(0)} s)`);
}
const sizeOf = async (rel) => Number((await q('SELECT pg_relation_size($1::regclass) AS b', [rel]))[0].b);
const shared = (await q('SHOW shared_buffers'))[0].shared_buffers;
const sharedBytes = Number(
  (
    await q(
      "SELECT setting::bigint * current_setting('block_size')::bigint AS b FROM pg_settings WHERE name = 'shared_buffers'",
    )
  )[0].b,
);
const sizes = {
  rows: Number((await q(`SELECT count(*)::bigint AS n FROM ${BIG}.inbox`))[0].n),
  heapBytes: await sizeOf(`${BIG}.inbox`),
  pkeyBytes: await sizeOf(`${BIG}.inbox_pkey`),
  expiresIdxBytes: await sizeOf(`${BIG}.inbox_expires_at_idx`),
  sharedBuffers: shared,
  sharedBuffersBytes: sharedBytes,
};
log(
  `inbox ${sizes.rows.toLocaleString('en')} rows: heap ${mib(sizes.heapBytes)}, primary key ${mib(sizes.pkeyBytes)}, expires_at index ${mib(sizes.expiresIdxBytes)}; shared_buffers ${shared}`,
);
if (sizes.pkeyBytes <= sharedBytes)
  log(
    'NOTE: shared_buffers is larger than the primary-key index: the index is not larger than the buffer cache here',
  );

// ---- 2. throughput, 10M-row inbox ÷ empty inbox
if (PHASES.has('throughput')) {
  await pool.query(`DROP SCHEMA IF EXISTS ${EMPTY} CASCADE`);
  await migrate(pool, { schema: EMPTY });
}
for (const s of PHASES.has('throughput') ? [BIG, EMPTY] : [BIG])
  await pool.query(`CREATE TABLE IF NOT EXISTS ${s}.effects (id text NOT NULL, amount int NOT NULL)`);

const envelope = (id) => ({
  id,
  body: Buffer.from(`{"amount":7,"id":"${id}"}`),
  headers: {},
  source: { broker: 'bench', queue: 'scale' },
  attempt: 1,
  redelivered: false,
});
const inboxes = new Map();
function inboxOf(schema, k, on = pool) {
  const key = `${schema} ${k}${on === livePool ? ' live' : ''}`;
  if (!inboxes.has(key))
    inboxes.set(
      key,
      createInbox({
        pool: on,
        schema,
        consumer: `scale-${k}`,
        lockTimeoutMs: 30_000,
        logger: false,
        handler: async (e, { tx }) => {
          await tx.query(`INSERT INTO ${schema}.effects (id, amount) VALUES ($1, $2)`, [e.id, 7]);
        },
      }),
    );
  return inboxes.get(key);
}
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

/** N fresh random ids in chunks of `batch`, spread over the 10 consumers, by C workers. */
async function drive(schema, batch) {
  const chunks = [];
  for (let i = 0; i < N; i += batch)
    chunks.push(Array.from({ length: Math.min(batch, N - i) }, () => envelope(randomUUID())));
  let next = 0;
  const lat = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next < chunks.length) {
        const i = next++;
        const inbox = inboxOf(schema, i % CONSUMERS);
        const s = performance.now();
        const outs = batch === 1 ? [await inbox.process(chunks[i][0])] : await inbox.processBatch(chunks[i]);
        lat.push(performance.now() - s);
        for (const o of outs) if (o.status !== 'processed') throw new Error(`unexpected ${o.status}`);
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  lat.sort((a, b) => a - b);
  return { rate: N / secs, cpuUsPerMsg: (cpu.user + cpu.system) / N, p50: pct(lat, 50), p99: pct(lat, 99) };
}

/** Phase 2: the interleaved repetitions on the big and the empty inbox, and their paired ratios. */
async function throughputPhase() {
  const at = new Date().toISOString();
  const variants = {
    'big/msg': [BIG, 1],
    'empty/msg': [EMPTY, 1],
    'big/batch100': [BIG, 100],
    'empty/batch100': [EMPTY, 100],
  };
  for (const [schema, batch] of Object.values(variants)) await drive(schema, batch); // warm-up
  const runs = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  for (let r = 0; r < REPS; r++) {
    const names = Object.keys(variants);
    const order = names.slice(r % names.length).concat(names.slice(0, r % names.length));
    for (const name of order) {
      // The server's counters per message beside each run: what a large inbox costs PostgreSQL
      // (full-page images in the WAL, blocks read from outside shared buffers, buffers written by
      // the backends themselves).
      const c0 = await serverCounters(variants[name][0], true);
      const run = await drive(...variants[name]);
      const c1 = await serverCounters(variants[name][0], true);
      run.serverPerMsg = Object.fromEntries(Object.keys(c0).map((k) => [k, (c1[k] - c0[k]) / N]));
      runs[name].push(run);
    }
    log(`  rep ${r + 1}: ${order.map((n) => `${n} ${runs[n].at(-1).rate.toFixed(0)}`).join(', ')} msgs/s`);
  }
  const throughput = Object.entries(runs).map(([variant, rs]) => ({
    variant,
    msgsPerSec: median(rs.map((x) => x.rate)),
    cpuUsPerMsg: median(rs.map((x) => x.cpuUsPerMsg)),
    p50Ms: median(rs.map((x) => x.p50)),
    p99Ms: median(rs.map((x) => x.p99)),
    repMsgsPerSec: rs.map((x) => Math.round(x.rate)),
    serverPerMsg: Object.fromEntries(
      Object.keys(rs[0].serverPerMsg).map((k) => [
        k,
        Number(median(rs.map((x) => x.serverPerMsg[k])).toFixed(3)),
      ]),
    ),
  }));
  const ratios = {
    'big ÷ empty, per message, msgs/s': pairedRatio(runs['big/msg'], runs['empty/msg'], (x) => x.rate),
    'big ÷ empty, batch 100, msgs/s': pairedRatio(
      runs['big/batch100'],
      runs['empty/batch100'],
      (x) => x.rate,
    ),
    'big ÷ empty, per message, CPU µs/msg': pairedRatio(
      runs['big/msg'],
      runs['empty/msg'],
      (x) => x.cpuUsPerMsg,
    ),
    'big ÷ empty, batch 100, CPU µs/msg': pairedRatio(
      runs['big/batch100'],
      runs['empty/batch100'],
      (x) => x.cpuUsPerMsg,
    ),
  };
  console.log('\n  variant          msgs/s  CPU µs/msg  p50 ms  p99 ms   runs');
  for (const t of throughput)
    console.log(
      `  ${t.variant.padEnd(15)} ${t.msgsPerSec.toFixed(0).padStart(7)} ${t.cpuUsPerMsg.toFixed(0).padStart(11)} ${t.p50Ms.toFixed(2).padStart(7)} ${t.p99Ms.toFixed(2).padStart(7)}   ${t.repMsgsPerSec.join(', ')}`,
    );
  console.log(
    '\n  variant          per message: WAL bytes  full-page images  blocks read (heap+index)  backend buffer writes',
  );
  for (const t of throughput) {
    const c = t.serverPerMsg;
    console.log(
      `  ${t.variant.padEnd(15)} ${c.wal_bytes.toFixed(0).padStart(22)} ${c.wal_fpi.toFixed(2).padStart(17)} ${(c.heap_blks_read + c.idx_blks_read).toFixed(2).padStart(25)} ${c.buffers_backend.toFixed(2).padStart(22)}`,
    );
  }
  for (const [label, r] of Object.entries(ratios)) {
    const target = label.includes('msgs/s') ? (r.median >= 0.9 ? '≥ 0.9 met' : '≥ 0.9 MISSED') : '';
    console.log(`  ${label.padEnd(38)} ${fmtRatio(r).padEnd(20)} ${target}`);
  }
  const pkeyAfter = await sizeOf(`${BIG}.inbox_pkey`);
  return {
    at,
    pkeyBytesAfterThroughputRuns: pkeyAfter,
    n: N,
    reps: REPS,
    concurrency: C,
    results: throughput,
    ratios: Object.fromEntries(
      Object.entries(ratios).map(([l, r]) => [
        l,
        { measured: r.median, min: r.min, max: r.max, reps: r.n, target: l.includes('msgs/s') ? 0.9 : null },
      ]),
    ),
  };
}
const throughputResult = PHASES.has('throughput') ? await throughputPhase() : undefined;

// ---- 3. purge beside live consumers
/** LIVE workers processing fresh messages one at a time on the big inbox until stopped; latencies by time. */
function liveConsumers() {
  const samples = []; // [end time ms, latency ms]
  const lateStarts = []; // paced: start times that came later than their slot
  let on = true;
  let n = 0;
  const gapMs = LIVE_RATE > 0 ? 1000 / LIVE_RATE : 0;
  const done = Promise.all(
    Array.from({ length: LIVE }, async (_, w) => {
      // Paced workers start their slots staggered, so they do not begin in step.
      let slot = performance.now() + (gapMs * w) / LIVE;
      while (on) {
        if (gapMs > 0) {
          const wait = slot - performance.now();
          if (wait > 0) await sleep(wait);
          // More than one slot behind: note it, and start counting slots from now.
          else if (-wait > gapMs) {
            lateStarts.push(slot);
            slot = performance.now();
          }
          slot += gapMs;
          if (!on) break;
        }
        const inbox = inboxOf(BIG, n++ % CONSUMERS, livePool);
        // The latency is the message's own, from its real start (not its slot).
        const rec = { claim: 0, effect: 0, commit: 0, other: 0 };
        const s = performance.now();
        const o = await stages.run(rec, () => inbox.process(envelope(randomUUID())));
        const e = performance.now();
        if (o.status !== 'processed') throw new Error(`live consumer: ${o.status}`);
        samples.push([e, e - s, rec]);
      }
    }),
  );
  return {
    window(from, to) {
      const inWindow = samples.filter(([t]) => t >= from && t < to).sort((a, b) => a[1] - b[1]);
      const lat = inWindow.map(([, d]) => d);
      // By stage: each stage's own p50 and p99, and the mean of each stage over the slowest 1 %
      // of messages (the ones the p99 is made of), the rest being Node's own time between queries.
      const slow = inWindow.slice(Math.floor(inWindow.length * 0.99));
      const byStage = {};
      for (const st of ['claim', 'effect', 'commit', 'other']) {
        const xs = inWindow.map(([, , r]) => r[st]).sort((a, b) => a - b);
        byStage[st] = {
          p50Ms: pct(xs, 50),
          p99Ms: pct(xs, 99),
          slowestMeanMs: slow.length ? slow.reduce((a, [, , r]) => a + r[st], 0) / slow.length : 0,
        };
      }
      byStage.node = {
        slowestMeanMs: slow.length
          ? slow.reduce((a, [, d, r]) => a + d - r.claim - r.effect - r.commit - r.other, 0) / slow.length
          : 0,
      };
      return {
        messages: lat.length,
        msgsPerSec: lat.length / ((to - from) / 1000),
        ...(gapMs > 0 ? { lateStarts: lateStarts.filter((t) => t >= from && t < to).length } : {}),
        p50Ms: pct(lat, 50),
        p99Ms: pct(lat, 99),
        byStage,
      };
    },
    async stop() {
      on = false;
      await done;
    },
  };
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const needLive = PHASES.has('purge') || PHASES.has('rest');
const live = needLive ? liveConsumers() : undefined;
if (live) await sleep(5000); // settle

/**
 * The baseline purge: the statement @once/core used before, the doomed rows found through the
 * expiry index and deleted by a join on the primary key, paced as `purge` paces (rowsPerSecond
 * averaged from the start). Inbox rows only: the starts table is empty here. From schema version 9
 * no foreign key cascades from inbox to steps, so it deletes the steps of the rows it deletes in
 * the same statement, as purge does (a data-modifying CTE); before, the cascade did, a trigger
 * query per deleted row, which this baseline no longer pays.
 */
async function purgePkJoin({
  schema,
  batchSize = PURGE_DEFAULT_BATCH,
  rowsPerSecond = Number.POSITIVE_INFINITY,
  signal,
}) {
  const started = performance.now();
  let deleted = 0;
  while (!signal.aborted) {
    const res = await pool.query(
      `WITH doomed AS (
        SELECT consumer, message_id FROM ${schema}.inbox WHERE expires_at < now()
        ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED),
      gone AS (DELETE FROM ${schema}.inbox AS i USING doomed AS d
        WHERE i.consumer = d.consumer AND i.message_id = d.message_id
        RETURNING i.consumer, i.message_id),
      gone_steps AS (DELETE FROM ${schema}.steps AS s USING gone AS g
        WHERE s.consumer = g.consumer AND s.message_id = g.message_id)
      SELECT count(*)::int AS n FROM gone`,
      [batchSize],
    );
    const n = res.rows[0]?.n ?? 0;
    deleted += n;
    if (n < batchSize) break;
    const wait = (deleted / rowsPerSecond) * 1000 - (performance.now() - started);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  return deleted;
}

let walZstd;
/** The `core-walzstd` purge's own pool: sessions that compress their WAL's page images. */
function walZstdPool() {
  walZstd ??= new pg.Pool({ connectionString: DB_URL, max: 1, options: '-c wal_compression=zstd' });
  return walZstd;
}

/**
 * The server's counters that a purge could move for the consumers: WAL written (records, full-page
 * images, bytes, flushes), shared buffers written by backends themselves or by the background
 * writer, checkpoints, and the big inbox's blocks read from outside shared buffers.
 */
async function serverCounters(schema = BIG, flush = false) {
  if (flush) await flushStats(pool);
  const [w] = await q(
    `SELECT wal_records, wal_fpi, wal_bytes::bigint, wal_buffers_full, wal_write, wal_sync FROM pg_stat_wal`,
  );
  const [b] = await q(
    `SELECT checkpoints_timed + checkpoints_req AS checkpoints, buffers_checkpoint, buffers_clean,
            buffers_backend, buffers_backend_fsync, buffers_alloc FROM pg_stat_bgwriter`,
  );
  const [r] = await q(
    `SELECT coalesce(sum(heap_blks_read), 0)::bigint AS heap_blks_read, coalesce(sum(heap_blks_hit), 0)::bigint AS heap_blks_hit,
            coalesce(sum(idx_blks_read), 0)::bigint AS idx_blks_read, coalesce(sum(idx_blks_hit), 0)::bigint AS idx_blks_hit
       FROM pg_statio_user_tables WHERE schemaname = $1`,
    [schema],
  );
  return Object.fromEntries(Object.entries({ ...w, ...b, ...r }).map(([k, v]) => [k, Number(v)]));
}
/** Counters per second between two readings. */
const perSecond = (a, b, seconds) =>
  Object.fromEntries(Object.keys(a).map((k) => [k, Math.round((b[k] - a[k]) / seconds)]));

/** One window without purge, then one of `purge(options)` for at most `maxS` seconds; both measured. */
async function windowPair(options, maxS, impl = 'core') {
  const s0 = await serverCounters();
  const b0 = performance.now();
  await sleep(WINDOW_S * 1000);
  const before = live.window(b0, performance.now());
  const s1 = await serverCounters();
  const b1 = performance.now();
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), maxS * 1000);
  const p0 = performance.now();
  const n =
    impl === 'pkjoin'
      ? await purgePkJoin({ schema: BIG, ...options, signal: stop.signal })
      : await purge(impl === 'core-walzstd' ? walZstdPool() : pool, {
          schema: BIG,
          ...options,
          signal: stop.signal,
        });
  clearTimeout(timer);
  const p1 = performance.now();
  const during = live.window(p0, p1);
  const s2 = await serverCounters();
  before.serverPerSecond = perSecond(s0, s1, (b1 - b0) / 1000);
  during.serverPerSecond = perSecond(s1, s2, (performance.now() - p0) / 1000);
  return {
    rowsPurged: n,
    seconds: (p1 - p0) / 1000,
    rowsPerSec: n / ((p1 - p0) / 1000),
    stoppedAtCap: stop.signal.aborted,
    before,
    during,
    p99Ratio: during.p99Ms / before.p99Ms,
    p50Ratio: during.p50Ms / before.p50Ms,
  };
}
const spread = (xs) => {
  const ys = xs.filter(Number.isFinite);
  return ys.length
    ? { median: median(ys), min: Math.min(...ys), max: Math.max(...ys), n: ys.length }
    : undefined;
};
let purged = 0;

// ---- 3. purge windows: PAIRS rounds, each round every rate once, so the rates are interleaved.
let purgeResult;
if (PHASES.has('purge')) {
  const at = new Date().toISOString();
  const windows = [];
  for (let pair = 1; pair <= PAIRS; pair++) {
    for (const rate of RATES)
      for (const batch of BATCH_VARIANTS)
        for (const impl of pair % 2 ? PURGE_IMPLS : [...PURGE_IMPLS].reverse()) {
          const w = {
            targetRowsPerSec: rate,
            batchSize: batch ?? PURGE_DEFAULT_BATCH,
            impl,
            pair,
            ...(await windowPair(
              { rowsPerSecond: rate, ...(batch ? { batchSize: batch } : {}) },
              WINDOW_S,
              impl,
            )),
          };
          w.minutesFor10M = 10_000_000 / w.rowsPerSec / 60;
          purged += w.rowsPurged;
          windows.push(w);
          const slowest = (x) =>
            Object.entries(x.byStage)
              .map(([k, v]) => `${k} ${v.slowestMeanMs.toFixed(2)}`)
              .join(', ');
          log(
            `    slowest 1 % by stage (mean ms): before ${slowest(w.before)}; during ${slowest(w.during)}; ` +
              `WAL bytes/s ${w.before.serverPerSecond.wal_bytes} → ${w.during.serverPerSecond.wal_bytes}, FPI/s ${w.before.serverPerSecond.wal_fpi} → ${w.during.serverPerSecond.wal_fpi}, backend buffer writes/s ${w.before.serverPerSecond.buffers_backend} → ${w.during.serverPerSecond.buffers_backend}, checkpoints ${w.before.serverPerSecond.checkpoints}/${w.during.serverPerSecond.checkpoints}`,
          );
          log(
            `  pair ${pair}, purge at ${rate} rows/s in statements of ${w.batchSize} (${impl}): ${w.rowsPurged.toLocaleString('en')} rows in ${w.seconds.toFixed(0)} s = ${w.rowsPerSec.toFixed(0)} rows/s (10M in ${w.minutesFor10M.toFixed(0)} min); ` +
              `live p50/p99 before ${w.before.p50Ms.toFixed(2)}/${w.before.p99Ms.toFixed(2)} ms (${w.before.msgsPerSec.toFixed(0)} msgs/s), during ${w.during.p50Ms.toFixed(2)}/${w.during.p99Ms.toFixed(2)} ms (${w.during.msgsPerSec.toFixed(0)} msgs/s): p99 ×${w.p99Ratio.toFixed(2)}`,
          );
        }
  }
  const byRate = RATES.flatMap((rate) =>
    BATCH_VARIANTS.flatMap((batch) =>
      PURGE_IMPLS.map((impl) => {
        const ws = windows.filter(
          (w) =>
            w.targetRowsPerSec === rate && w.batchSize === (batch ?? PURGE_DEFAULT_BATCH) && w.impl === impl,
        );
        return {
          targetRowsPerSec: rate,
          batchSize: batch ?? PURGE_DEFAULT_BATCH,
          impl,
          pairs: ws.length,
          p99Ratio: spread(ws.map((w) => w.p99Ratio)),
          p50Ratio: spread(ws.map((w) => w.p50Ratio)),
          rowsPerSec: spread(ws.map((w) => w.rowsPerSec)),
          rowsPurged: ws.reduce((n, w) => n + w.rowsPurged, 0),
        };
      }),
    ),
  );
  console.log(
    `\n  purge rate (rows/s)  rows/statement  statement  achieved rows/s (median)  p99 during ÷ before, median [min–max] of ${PAIRS} pair(s)`,
  );
  for (const r of byRate)
    console.log(
      `  ${String(r.targetRowsPerSec).padStart(19)}  ${String(r.batchSize).padStart(14)}  ${r.impl.padStart(9)}  ${(r.rowsPerSec?.median ?? 0).toFixed(0).padStart(24)}  ${r.p99Ratio ? fmtRatio(r.p99Ratio) : 'n/a (no live samples)'}`,
    );
  purgeResult = {
    at,
    liveWorkers: LIVE,
    liveRatePerWorker: LIVE_RATE || null,
    windowSeconds: WINDOW_S,
    pairs: PAIRS,
    windows,
    byRate,
  };
}

// ---- 4. the rest, unpaced.
let rest;
if (PHASES.has('rest')) {
  rest = { at: new Date().toISOString(), ...(await windowPair({}, REST_MAX_S)) };
  purged += rest.rowsPurged;
  rest.expiredLeft = Number(
    (await q(`SELECT count(*)::bigint AS n FROM ${BIG}.inbox WHERE expires_at < now()`))[0].n,
  );
  log(
    `  purge unpaced: ${rest.rowsPurged.toLocaleString('en')} rows in ${rest.seconds.toFixed(0)} s = ${rest.rowsPerSec.toFixed(0)} rows/s${rest.stoppedAtCap ? ` (stopped at the ${REST_MAX_S} s cap, ${rest.expiredLeft.toLocaleString('en')} expired rows left)` : ''}; ` +
      `live p50/p99 before ${rest.before.p50Ms.toFixed(2)}/${rest.before.p99Ms.toFixed(2)} ms, during ${rest.during.p50Ms.toFixed(2)}/${rest.during.p99Ms.toFixed(2)} ms: p99 ×${rest.p99Ratio.toFixed(2)}`,
  );
}
await live?.stop();
const liveRows = Number(
  (await q(`SELECT count(*)::bigint AS n FROM ${BIG}.inbox WHERE expires_at >= now()`))[0].n,
);
if (needLive)
  log(`purged ${purged.toLocaleString('en')} rows in all; ${liveRows.toLocaleString('en')} live rows kept`);

// A run of some phases replaces only their sections: the rest of the file is the earlier run's.
const file = process.env.BENCH_OUT ?? new URL('../results/scale.json', import.meta.url);
let previous = {};
try {
  previous = JSON.parse(readFileSync(file, 'utf8'));
} catch {
  // No earlier results (or unreadable ones): this run's sections only.
}
// A reused inbox keeps the earlier load's record (how long it took), with this reuse beside it.
const loadRecord = load.reused && previous.load ? { ...previous.load, reuse: load } : load;
// The earlier run's totals describe its windows, not this run's: dropped when a section is replaced.
const { purged: _purged, liveRowsKept: _kept, ...previousPurge } = previous.purge ?? {};
writeFileSync(
  file,
  `${JSON.stringify(
    {
      ...previous,
      at: new Date().toISOString(),
      commit: gitCommit(),
      phases: ALL_PHASES.filter((p) => PHASES.has(p)),
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
      server: await serverSettings(pool),
      sizes,
      load: loadRecord,
      ...(throughputResult ? { throughput: throughputResult } : {}),
      ...(needLive
        ? {
            purge: {
              ...previousPurge,
              ...(purgeResult ?? {}),
              ...(rest ? { rest } : {}),
              ...(purgeResult && rest ? { purged } : {}),
              liveRowsKept: liveRows,
            },
          }
        : {}),
    },
    null,
    2,
  )}\n`,
);
await walZstd?.end();
await livePool.end();
if (!KEEP) await pool.query(`DROP SCHEMA ${BIG} CASCADE`);
if (PHASES.has('throughput')) await pool.query(`DROP SCHEMA ${EMPTY} CASCADE`);
await pool.end();
