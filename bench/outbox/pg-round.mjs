// What a relayed row costs PostgreSQL, by part of the round (issue #14, step 3): the relay's own
// statements (as in packages/core/src/sql/outbox.ts) against variants that each leave one part
// out, so that the difference in the server's CPU per row is that part's price. No broker: a
// round claims up to 100 rows, "publishes" nothing, marks them sent and commits, as a relay with
// a publisher that confirms at once would. One connection, rounds one after another.
//
// Variants (every one drains the same backlog, BENCH_ROWS rows, default 20,000, over BENCH_KEYS
// keys, default 1,000, written afresh before each drain; only `relay` keeps every guarantee):
//   relay       the relay's round: BEGIN with synchronous_commit pinned and the claim (the oldest
//               pending row per key, FOR UPDATE SKIP LOCKED) in one round trip, then the
//               mark-sent UPDATE and COMMIT in one
//   no-key      the claim without the per-key check (what a keyless outbox row costs)
//   no-lock     the claim without FOR UPDATE SKIP LOCKED (two relays could take the same rows)
//   no-sent-idx the relay's round on a table without the partial index of sent rows (cleanup's)
//   delete      the rows deleted at COMMIT instead of marked sent (no sent rows kept for
//               inspection or for cleanup by age)
//   async       the relay's round with synchronous_commit off (a row could count as sent on a
//               commit a crash loses)
// The server's CPU is the backend's own (utime + stime from /proc, in clock ticks) plus the WAL
// writer's and the checkpointer's, over the drain; WAL bytes per row from pg_stat_wal, flushed
// before each reading. BENCH_REPS (default 7) interleaved repetitions, the order rotating; medians
// of the per-repetition figures, and each variant's CPU per row ÷ relay's, paired per repetition.
// Results: bench/results/outbox-pg-round.json (BENCH_OUT: another file).
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { migrate } from '@once/core';
import pg from 'pg';
// The relay's statements as built (as purge-plan.mjs takes the inbox's): what is measured is what
// the relay runs. `npm run build` first.
import { outboxSql } from '../../packages/core/dist/sql/outbox.js';
import { fmtRatio, gitCommit, machine, median, pairedRatio } from '../support/report.mjs';

const ROWS = Number(process.env.BENCH_ROWS ?? 20_000);
const KEYS = Number(process.env.BENCH_KEYS ?? 1_000);
const BATCH = 100;
const REPS = Number(process.env.BENCH_REPS ?? 7);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = 'bench_outbox_pg_round';
const NOIDX = 'bench_outbox_pg_round_noidx';

const admin = new pg.Client({ connectionString: DB_URL });
await admin.connect();
const setup = new pg.Pool({ connectionString: DB_URL, max: 1 });
for (const s of [SCHEMA, NOIDX]) {
  await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  await migrate(setup, { schema: s });
}
await setup.end();
await admin.query(`DROP INDEX ${NOIDX}.outbox_sent_idx`);

/** `sql` with `pattern` replaced; throws when it is not there (the relay's SQL changed under us). */
function without(sql, pattern, replacement = '') {
  const out = sql.replace(pattern, replacement);
  if (out === sql) throw new Error(`pg-round: ${pattern} not found in the relay's claim: update the variant`);
  return out;
}

/**
 * The round's statements for one variant: [begin + claim, mark + commit (given the seqs)]. The
 * relay's own (packages/core/src/sql/outbox.ts, as built), or a variant cut from them.
 */
function statements(variant, schema) {
  const sql = outboxSql(schema);
  let claim = sql.beginAndClaim(BATCH);
  if (variant === 'no-key')
    claim = without(claim, /\s+AND \(o\.key IS NULL OR NOT EXISTS \([\s\S]*?p\.seq < o\.seq\)\)/);
  if (variant === 'no-lock') claim = without(claim, /\s+FOR UPDATE OF o SKIP LOCKED/);
  if (variant === 'async') claim = without(claim, 'synchronous_commit = on', 'synchronous_commit = off');
  const mark = variant === 'delete' ? sql.deleteSentAndCommit : sql.markSentAndCommit;
  return { claim, mark: (seqs) => mark(seqs.map(String)) };
}

/** Ticks of the WAL writer, the checkpointer and the background writer (they work for the commits), summed. */
function helperTicks() {
  let ticks = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let cmd;
    try {
      cmd = readFileSync(`/proc/${d}/cmdline`, 'latin1');
    } catch {
      continue;
    }
    if (!/^postgres: .*(walwriter|checkpointer|background writer)/.test(cmd)) continue;
    ticks += procTicks(d);
  }
  return ticks;
}
function procTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]);
  } catch {
    return 0;
  }
}

async function walBytes() {
  await admin.query('SELECT pg_stat_force_next_flush()');
  return Number((await admin.query('SELECT wal_bytes::bigint AS b FROM pg_stat_wal')).rows[0].b);
}

/** A fresh backlog: ROWS pending rows over KEYS keys (none for no-key), in seq order. */
async function fill(variant) {
  const schema = variant === 'no-sent-idx' ? NOIDX : SCHEMA;
  await admin.query(`TRUNCATE ${schema}.outbox`);
  const key = variant === 'no-key' || KEYS === 0 ? 'NULL' : `'k' || (g % ${KEYS})`;
  await admin.query(
    `INSERT INTO ${schema}.outbox (destination, key, body, message_id)
     SELECT 'bench', ${key}, convert_to(repeat('x', 64), 'UTF8'), gen_random_uuid()::text FROM generate_series(1, ${ROWS}) AS g`,
  );
  await admin.query(`VACUUM ANALYZE ${schema}.outbox`);
  return schema;
}

async function drain(variant) {
  const schema = await fill(variant);
  const { claim, mark } = statements(variant, schema);
  const client = new pg.Client({ connectionString: DB_URL });
  await client.connect();
  const pid = (await client.query('SELECT pg_backend_pid() AS p')).rows[0].p;
  const w0 = await walBytes();
  const b0 = procTicks(pid);
  const h0 = helperTicks();
  const t0 = performance.now();
  let sent = 0;
  for (;;) {
    const res = await client.query(claim);
    const rows = res.at(-1).rows;
    if (rows.length === 0) {
      await client.query('COMMIT');
      break;
    }
    await client.query(mark(rows.map((r) => r.seq)));
    sent += rows.length;
  }
  const secs = (performance.now() - t0) / 1000;
  const backend = procTicks(pid) - b0;
  const helpers = helperTicks() - h0;
  await client.query('SELECT pg_stat_force_next_flush()');
  const wal = (await walBytes()) - w0;
  await client.end();
  if (sent !== ROWS) throw new Error(`${variant}: ${sent} of ${ROWS} rows sent`);
  return {
    rowsPerSec: ROWS / secs,
    backendUsPerRow: (backend * 10_000) / ROWS,
    serverUsPerRow: ((backend + helpers) * 10_000) / ROWS,
    walBytesPerRow: wal / ROWS,
  };
}

const VARIANTS = ['relay', 'no-key', 'no-lock', 'no-sent-idx', 'delete', 'async'];
const runs = Object.fromEntries(VARIANTS.map((v) => [v, []]));
console.log(`outbox pg-round: ${ROWS} rows, ${KEYS} keys, rounds of ${BATCH}, ${REPS} reps`);
for (const v of VARIANTS) await drain(v); // warm-up
for (let r = 0; r < REPS; r++) {
  const order = VARIANTS.slice(r % VARIANTS.length).concat(VARIANTS.slice(0, r % VARIANTS.length));
  for (const v of order) runs[v].push(await drain(v));
  console.log(
    `  rep ${r + 1}: ${VARIANTS.map((v) => `${v} ${runs[v].at(-1).rowsPerSec.toFixed(0)}`).join(', ')} rows/s`,
  );
}
const results = VARIANTS.map((v) => ({
  variant: v,
  rowsPerSec: median(runs[v].map((x) => x.rowsPerSec)),
  backendUsPerRow: median(runs[v].map((x) => x.backendUsPerRow)),
  serverUsPerRow: median(runs[v].map((x) => x.serverUsPerRow)),
  walBytesPerRow: median(runs[v].map((x) => x.walBytesPerRow)),
  cpuRatioToRelay: pairedRatio(runs[v], runs.relay, (x) => x.serverUsPerRow),
}));
console.log('\n  variant       rows/s  backend µs/row  server µs/row  WAL B/row  server CPU ÷ relay');
for (const t of results)
  console.log(
    `  ${t.variant.padEnd(12)} ${t.rowsPerSec.toFixed(0).padStart(7)} ${t.backendUsPerRow.toFixed(1).padStart(15)} ${t.serverUsPerRow.toFixed(1).padStart(14)} ${t.walBytesPerRow.toFixed(0).padStart(10)}  ${fmtRatio(t.cpuRatioToRelay)}`,
  );
const file = process.env.BENCH_OUT ?? new URL('../results/outbox-pg-round.json', import.meta.url);
writeFileSync(
  file,
  `${JSON.stringify(
    {
      at: new Date().toISOString(),
      commit: gitCommit(),
      machine: machine(),
      rows: ROWS,
      keys: KEYS,
      batch: BATCH,
      reps: REPS,
      results,
      runs,
    },
    null,
    2,
  )}\n`,
);
for (const s of [SCHEMA, NOIDX]) await admin.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
await admin.end();
