// Inbox table shapes on a 10-million-row inbox (issue #14, step 4's alternatives), opt-in:
// `npm run bench -- --shapes` or `node bench/core/scale-shapes.mjs`.
//
// The scale bench (scale.mjs) showed once's claim slowing on a large inbox of random UUID ids: the
// primary key's B-tree outgrows shared_buffers, and each claim reads in, dirties and later writes
// out a random leaf page, with a full-page image in the WAL after each checkpoint. This bench asks
// whether another table shape avoids that, with the floor's hand-written SQL (bench/support/
// floor.mjs: BEGIN and the claim in one simple-query round trip, the effect, COMMIT; batched, one
// multi-row claim of sorted ids) so that only the shape differs. Three shapes, each in a schema of
// its own, loaded with BENCH_SCALE_ROWS (default 10,000,000) rows of random UUID text ids over 10
// consumers, live (expiring over the next 7 days, as a week of traffic under 7 days' retention),
// each beside an empty twin with the same DDL:
//
// - btree: the floor's table, PRIMARY KEY (consumer, message_id), an index on expires_at.
// - hash:  no B-tree on the id at all: EXCLUDE USING hash on an injective text of (consumer, id)
//          (length(consumer) || ':' || consumer || message_id). A hash index stores a 4-byte hash
//          code per row and checks a match against the full value in the row, so uniqueness and
//          the duplicate decision stay on the full id, and ON CONFLICT DO NOTHING takes the
//          exclusion constraint as it takes a unique one. The index is smaller; its buckets are
//          still random.
// - part:  partitioned by day of expires_at (8 partitions: 7 days of loaded rows, the newest one
//          half full, as at noon), each partition with its own (consumer, message_id, expires_at)
//          key. PostgreSQL has no uniqueness across partitions, so the claim is serialised per id
//          by a transaction-level advisory lock taken in its own statement (so that the check's
//          snapshot is taken after the lock is granted), then checks every partition for the id
//          (no pruning) and inserts into the newest: new index entries land in one
//          small partition, and the old ones are only read. Batched: the locks in the order of
//          their keys (no deadlock between overlapping batches), then one INSERT … SELECT. The
//          check is a correlated subquery with LIMIT 1, not NOT EXISTS: a generic plan made while
//          the partitions were empty turned NOT EXISTS into a hash anti-join reading every row of
//          the consumer, where the subquery can only be one index probe per partition and id.
//          A purge would drop a whole partition.
// - partfn: the same tables and statements inside a PL/pgSQL function, `claim(consumer, ids,
//          retention)`, called from the BEGIN round trip, with `plan_cache_mode =
//          force_generic_plan`: a simple-query statement is planned afresh each time, over every
//          partition, and so is a function's statement while PL/pgSQL picks custom plans (under
//          pgbench at c = 1 here: the plain claim 0.50 ms, the function 0.59 ms, the function with
//          generic plans 0.27 ms, the btree's claim 0.16 ms). A volatile function's statements
//          each take their own snapshot, so the check still sees what committed before its lock
//          was granted. It runs on part's schemas, interleaved with part.
//
// The effect is an insert into an index-less table, one statement for all the claimed ids, sent
// with COMMIT. Per message and batched (BENCH_BATCH, default 100), BENCH_REPS (default 7) interleaved
// repetitions, rotating the order; BENCH_N (default 8,000) messages one at a time and
// BENCH_N_BATCH (default 30,000) batched, by BENCH_SCALE_CONCURRENCY (default 4) workers, fresh
// random ids. Ratios are medians of per-repetition paired ratios [min–max]: each shape's big ÷
// empty, and each shape ÷ btree on the big and on the empty inbox. Beside each run, the server's
// counters per message (WAL bytes, full-page images, blocks read, buffers a backend wrote out).
// Before the runs, a check that each shape takes an id once: eight concurrent claims of one id,
// one effect; a second claim after the first commit, none.
// BENCH_SHAPES (default btree,hash,part,partfn) picks shapes (partfn loads part's tables); BENCH_SHAPES_KEEP=1 keeps the loaded
// schemas for a rerun (reused while they hold BENCH_SCALE_ROWS rows or more). Results:
// bench/results/scale-shapes.json (BENCH_OUT: another file).
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { flushStats, serverSettings } from '../support/pg-server.mjs';
import { fmtRatio, gitCommit, machine, median, pairedRatio } from '../support/report.mjs';

const ROWS = Number(process.env.BENCH_SCALE_ROWS ?? 10_000_000);
const CONSUMERS = 10;
const REPS = Number(process.env.BENCH_REPS ?? 7);
const N_MSG = Number(process.env.BENCH_N ?? 8000);
const N_BATCH = Number(process.env.BENCH_N_BATCH ?? 30_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const C = Number(process.env.BENCH_SCALE_CONCURRENCY ?? 4);
const KEEP = process.env.BENCH_SHAPES_KEEP === '1';
const ALL_SHAPES = ['btree', 'hash', 'part', 'partfn'];
const SHAPES = (process.env.BENCH_SHAPES ?? ALL_SHAPES.join(',')).split(',').map((s) => s.trim());
for (const s of SHAPES)
  if (!ALL_SHAPES.includes(s))
    throw new Error(`BENCH_SHAPES: unknown shape ${JSON.stringify(s)} (known: ${ALL_SHAPES.join(', ')})`);
for (const [name, v] of Object.entries({ ROWS, REPS, N_MSG, N_BATCH, BATCH, C }))
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a whole number >= 1, got ${v}`);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const RETENTION = "interval '7 days'";
/** The advisory-lock class of the partitioned claim (the two-int form keeps it apart from others). */
const LOCK_CLASS = 1_419_000;
const CHUNK = 1_000_000;

const pool = new pg.Pool({ connectionString: DB_URL, max: C + 2 });
pool.on('error', () => {});
const q = async (sql, params) => (await pool.query(sql, params)).rows;
const log = (...a) => console.log(`[${new Date().toISOString().slice(11, 19)}]`, ...a);
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const lit = pg.escapeLiteral;

/** partfn runs on part's tables. */
const tablesOf = (shape) => (shape === 'partfn' ? 'part' : shape);
const schemaOf = (shape, size) => `shape_${tablesOf(shape)}_${size}`;
/** The shapes whose tables are loaded: partfn's are part's. */
const TABLES = [...new Set(SHAPES.map(tablesOf))];
/** The injective key the hash shape's exclusion constraint is on. */
const HASH_KEY = `(length(consumer)::text || ':' || consumer || message_id)`;

/** The DDL of one shape (the schema exists). `base` is the partitions' first bound (partitioned shape). */
function ddl(shape, s, base) {
  const effects = `CREATE TABLE ${s}.effects (id text NOT NULL, amount int NOT NULL)`;
  if (shape === 'btree')
    return [
      `CREATE TABLE ${s}.inbox (consumer text, message_id text, expires_at timestamptz, PRIMARY KEY (consumer, message_id))`,
      `CREATE INDEX ON ${s}.inbox (expires_at)`,
      effects,
    ];
  if (shape === 'hash')
    return [
      `CREATE TABLE ${s}.inbox (consumer text NOT NULL, message_id text NOT NULL, expires_at timestamptz,
         CONSTRAINT inbox_id_excl EXCLUDE USING hash (${HASH_KEY} WITH =))`,
      `CREATE INDEX ON ${s}.inbox (expires_at)`,
      effects,
    ];
  const out = [
    `CREATE TABLE ${s}.inbox (consumer text NOT NULL, message_id text NOT NULL, expires_at timestamptz NOT NULL,
       PRIMARY KEY (consumer, message_id, expires_at)) PARTITION BY RANGE (expires_at)`,
    `CREATE INDEX ON ${s}.inbox (expires_at)`,
    effects,
  ];
  out.push(`CREATE FUNCTION ${s}.claim(c text, ids text[], retention interval) RETURNS SETOF text
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $f$
    BEGIN
      PERFORM pg_advisory_xact_lock(${LOCK_CLASS}, t.k)
        FROM (SELECT DISTINCT hashtext(c || E'\\n' || m) AS k FROM unnest(ids) AS m ORDER BY k) AS t;
      RETURN QUERY INSERT INTO ${s}.inbox AS i (consumer, message_id, expires_at)
        SELECT c, m, now() + retention FROM unnest(ids) AS m
        WHERE (SELECT true FROM ${s}.inbox AS x WHERE x.consumer = c AND x.message_id = m LIMIT 1) IS NULL
        RETURNING i.message_id;
    END $f$`);
  for (let d = 0; d < 8; d++)
    out.push(
      `CREATE TABLE ${s}.inbox_d${d} PARTITION OF ${s}.inbox FOR VALUES FROM (${lit(base)}::timestamptz + ${d} * interval '1 day') TO (${lit(base)}::timestamptz + ${d + 1} * interval '1 day')`,
    );
  return out;
}

/** The claim of `ids` (sorted, distinct) by `consumer`, with BEGIN, as one simple-query string. */
function claimSql(shape, s, consumer, ids) {
  const c = lit(consumer);
  if (shape === 'partfn')
    return `BEGIN; SELECT m AS message_id FROM ${s}.claim(${c}, ARRAY[${ids.map(lit).join(', ')}]::text[], ${RETENTION}) AS m`;
  if (shape !== 'part') {
    const values = ids.map((id) => `(${c}, ${lit(id)}, now() + ${RETENTION})`).join(', ');
    return `BEGIN; INSERT INTO ${s}.inbox (consumer, message_id, expires_at) VALUES ${values} ON CONFLICT DO NOTHING RETURNING message_id`;
  }
  const arr = `ARRAY[${ids.map(lit).join(', ')}]::text[]`;
  // One statement takes the locks, the next checks and inserts with a snapshot taken after them.
  const lock =
    ids.length === 1
      ? `SELECT pg_advisory_xact_lock(${LOCK_CLASS}, hashtext(${lit(`${consumer}\n${ids[0]}`)}))`
      : `SELECT count(pg_advisory_xact_lock(${LOCK_CLASS}, k)) FROM (SELECT DISTINCT hashtext(${c} || E'\\n' || m) AS k FROM unnest(${arr}) AS m ORDER BY k) AS t`;
  return `BEGIN; ${lock}; INSERT INTO ${s}.inbox (consumer, message_id, expires_at)
    SELECT ${c}, m, now() + ${RETENTION} FROM unnest(${arr}) AS m
    WHERE (SELECT true FROM ${s}.inbox AS i WHERE i.consumer = ${c} AND i.message_id = m LIMIT 1) IS NULL RETURNING message_id`;
}

/** Claims `ids`, runs the effect per claimed id, commits; returns how many were claimed. */
async function claimAndRun(shape, s, consumer, ids) {
  const client = await pool.connect();
  try {
    const res = await client.query(claimSql(shape, s, consumer, ids));
    const claimed = res.at(-1).rows;
    // The effect, and COMMIT, in one round trip: the batch's effects as one statement, so that
    // a batch's time is mostly its claim's and its commit's, where the shapes differ.
    const effect = claimed.length
      ? `INSERT INTO ${s}.effects (id, amount) VALUES ${claimed.map((r) => `(${lit(r.message_id)}, 7)`).join(', ')}; `
      : '';
    await client.query(`${effect}COMMIT`);
    client.release();
    return claimed.length;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
      client.release();
    } catch (e) {
      client.release(e);
    }
    throw err;
  }
}

// ---- load
const base = (await q("SELECT (now() - interval '12 hours')::text AS b"))[0].b;
const load = {};
for (const shape of TABLES) {
  const big = schemaOf(shape, 'big');
  const empty = schemaOf(shape, 'empty');
  await pool.query(`DROP SCHEMA IF EXISTS ${empty} CASCADE`);
  await pool.query(`CREATE SCHEMA ${empty}`);
  // The empty twin's partitions have the same bounds as the big one's.
  const have = KEEP
    ? await q(`SELECT count(*)::bigint AS n FROM ${big}.inbox`).then(
        (r) => Number(r[0].n),
        () => 0,
      )
    : 0;
  let bigBase = base;
  if (have >= ROWS) {
    if (shape === 'part')
      bigBase = (
        await q(
          `SELECT min(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \\(''([^'']+)''')) AS b
             FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid WHERE h.inhparent = $1::regclass`,
          [`${big}.inbox`],
        )
      )[0].b;
    await pool.query(`TRUNCATE ${big}.effects`);
    load[shape] = { reused: true, rows: have };
    log(`${shape}: reusing ${big} (${have.toLocaleString('en')} rows)`);
  } else {
    await pool.query(`DROP SCHEMA IF EXISTS ${big} CASCADE`);
    await pool.query(`CREATE SCHEMA ${big}`);
    for (const sql of ddl(shape, big, base)) await pool.query(sql);
    const t0 = performance.now();
    // Loaded with the indexes in place, as an inbox grows (a B-tree filled by random inserts has
    // the page splits a real one has, not the packed pages of a bulk build).
    for (let from = 1; from <= ROWS; from += CHUNK) {
      const to = Math.min(ROWS, from + CHUNK - 1);
      await pool.query(
        `INSERT INTO ${big}.inbox (consumer, message_id, expires_at)
         SELECT 'shape-' || (g % ${CONSUMERS}), gen_random_uuid()::text, now() + (g::float8 / ${ROWS}) * interval '7 days'
         FROM generate_series($1::bigint, $2::bigint) AS g`,
        [from, to],
      );
      log(
        `  ${shape}: loaded ${to.toLocaleString('en')} rows (${((performance.now() - t0) / 1000).toFixed(0)} s)`,
      );
    }
    await pool.query(`VACUUM ANALYZE ${big}.inbox`);
    load[shape] = { reused: false, rows: ROWS, seconds: (performance.now() - t0) / 1000 };
    log(`${shape}: load ${load[shape].seconds.toFixed(0)} s with VACUUM ANALYZE`);
  }
  for (const sql of ddl(shape, empty, bigBase)) await pool.query(sql);
}

// ---- sizes: each shape's indexes against shared_buffers
const shared = (await q('SHOW shared_buffers'))[0].shared_buffers;
// The settings that decide what a large inbox costs (see docs/history/benchmarks-issue-14.md, "Sixth round").
const server = await serverSettings(pool);
log(
  `server: ${Object.entries(server)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')}`,
);
const sizes = {};
for (const shape of TABLES) {
  const s = schemaOf(shape, 'big');
  const rels = await q(
    `SELECT c.relname, c.relkind, pg_relation_size(c.oid)::bigint AS b FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'i') AND c.relname <> 'effects' ORDER BY c.relname`,
    [s],
  );
  const idOf = (r) =>
    r.relkind === 'i' && !r.relname.includes('expires_at') && !r.relname.endsWith('_expires_at_idx');
  sizes[shape] = {
    heapBytes: rels.filter((r) => r.relkind === 'r').reduce((a, r) => a + Number(r.b), 0),
    idIndexBytes: rels.filter(idOf).reduce((a, r) => a + Number(r.b), 0),
    expiresIndexBytes: rels.filter((r) => r.relkind === 'i' && !idOf(r)).reduce((a, r) => a + Number(r.b), 0),
  };
  if (shape === 'part') {
    const newest = rels.filter((r) => r.relkind === 'i' && r.relname.startsWith('inbox_d7') && idOf(r));
    sizes[shape].newestPartitionIdIndexBytes = newest.reduce((a, r) => a + Number(r.b), 0);
  }
  log(
    `${shape}: heap ${mib(sizes[shape].heapBytes)}, id index ${mib(sizes[shape].idIndexBytes)}` +
      `${shape === 'part' ? ` (the newest partition's ${mib(sizes[shape].newestPartitionIdIndexBytes)})` : ''}` +
      `, expires_at index ${mib(sizes[shape].expiresIndexBytes)}; shared_buffers ${shared}`,
  );
}

// ---- each shape takes an id once
const once = {};
for (const shape of SHAPES) {
  const s = schemaOf(shape, 'empty');
  const id = randomUUID();
  const first = await Promise.all(Array.from({ length: 8 }, () => claimAndRun(shape, s, 'shape-0', [id])));
  const again = await claimAndRun(shape, s, 'shape-0', [id]);
  const other = await claimAndRun(shape, s, 'shape-1', [id]); // another consumer's id is its own
  const effects = Number((await q(`SELECT count(*)::int AS n FROM ${s}.effects WHERE id = $1`, [id]))[0].n);
  const ok = first.reduce((a, b) => a + b, 0) === 1 && again === 0 && other === 1 && effects === 2;
  once[shape] = { concurrentClaims: first, afterCommit: again, otherConsumer: other, effects, ok };
  log(
    `${shape}: 8 concurrent claims of one id took ${first.reduce((a, b) => a + b, 0)}, one after their commit took ${again}, another consumer's took ${other}: ${ok ? 'OK' : 'WRONG'}`,
  );
  if (!ok) throw new Error(`${shape}: an id was not taken exactly once per consumer`);
  await pool.query(`TRUNCATE ${s}.inbox, ${s}.effects`);
}

// ---- throughput
async function serverCounters(schema) {
  await flushStats(pool);
  const [w] = await q('SELECT wal_fpi, wal_bytes::bigint FROM pg_stat_wal');
  const [b] = await q(
    'SELECT buffers_backend, checkpoints_timed + checkpoints_req AS checkpoints FROM pg_stat_bgwriter',
  );
  const [r] = await q(
    `SELECT coalesce(sum(heap_blks_read), 0)::bigint + coalesce(sum(idx_blks_read), 0)::bigint AS blks_read
       FROM pg_statio_user_tables WHERE schemaname = $1`,
    [schema],
  );
  return Object.fromEntries(Object.entries({ ...w, ...b, ...r }).map(([k, v]) => [k, Number(v)]));
}

/** `n` fresh ids in claims of `batch`, by C workers, spread over the consumers. */
async function drive(shape, size, batch, n) {
  const s = schemaOf(shape, size);
  const chunks = [];
  for (let i = 0; i < n; i += batch)
    chunks.push(Array.from({ length: Math.min(batch, n - i) }, () => randomUUID()).sort());
  let next = 0;
  let claimed = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next < chunks.length) {
        const i = next++;
        const took = await claimAndRun(shape, s, `shape-${i % CONSUMERS}`, chunks[i]);
        claimed += took; // not `claimed += await …`, which adds to the value read before the await
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  if (claimed !== n) throw new Error(`${shape} ${size}: ${claimed} of ${n} fresh ids claimed`);
  return { rate: n / secs, cpuUsPerMsg: (cpu.user + cpu.system) / n, n };
}

const variants = {};
for (const shape of SHAPES)
  for (const size of ['big', 'empty']) {
    variants[`${shape}/${size}/msg`] = [shape, size, 1, N_MSG];
    variants[`${shape}/${size}/batch`] = [shape, size, BATCH, N_BATCH];
  }
log(
  `throughput: ${REPS} reps; ${N_MSG} msgs one at a time, ${N_BATCH} in batches of ${BATCH}; c=${C}; shapes ${SHAPES.join(', ')}`,
);
for (const v of Object.values(variants)) await drive(v[0], v[1], v[2], Math.min(v[3], 1000)); // warm-up
const runs = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
const names = Object.keys(variants);
for (let r = 0; r < REPS; r++) {
  const order = names.slice(r % names.length).concat(names.slice(0, r % names.length));
  for (const name of order) {
    const [shape, size, batch, n] = variants[name];
    const c0 = await serverCounters(schemaOf(shape, size));
    const run = await drive(shape, size, batch, n);
    const c1 = await serverCounters(schemaOf(shape, size));
    run.serverPerMsg = Object.fromEntries(Object.keys(c0).map((k) => [k, (c1[k] - c0[k]) / n]));
    runs[name].push(run);
  }
  log(`  rep ${r + 1}: ${names.map((n) => `${n} ${runs[n].at(-1).rate.toFixed(0)}`).join(', ')}`);
}

const results = Object.entries(runs).map(([variant, rs]) => ({
  variant,
  msgsPerSec: median(rs.map((x) => x.rate)),
  cpuUsPerMsg: median(rs.map((x) => x.cpuUsPerMsg)),
  repMsgsPerSec: rs.map((x) => Math.round(x.rate)),
  // Checkpoints that began during this variant's runs, all repetitions together.
  checkpoints: Math.round(rs.reduce((a, x) => a + x.serverPerMsg.checkpoints * x.n, 0)),
  serverPerMsg: Object.fromEntries(
    Object.keys(rs[0].serverPerMsg).map((k) => [
      k,
      Number(median(rs.map((x) => x.serverPerMsg[k])).toFixed(3)),
    ]),
  ),
}));
console.log(
  '\n  variant              msgs/s  CPU µs/msg  WAL B/msg  FPI/msg  blocks read/msg  backend writes/msg  checkpoints',
);
for (const t of results) {
  const c = t.serverPerMsg;
  console.log(
    `  ${t.variant.padEnd(19)} ${t.msgsPerSec.toFixed(0).padStart(7)} ${t.cpuUsPerMsg.toFixed(0).padStart(11)} ${c.wal_bytes.toFixed(0).padStart(10)} ${c.wal_fpi.toFixed(2).padStart(8)} ${c.blks_read.toFixed(2).padStart(16)} ${c.buffers_backend.toFixed(2).padStart(19)} ${String(t.checkpoints).padStart(12)}`,
  );
}
const rate = (x) => x.rate;
const ratios = {};
for (const shape of SHAPES)
  for (const mode of ['msg', 'batch']) {
    ratios[`${shape} big ÷ ${shape} empty, ${mode}`] = pairedRatio(
      runs[`${shape}/big/${mode}`],
      runs[`${shape}/empty/${mode}`],
      rate,
    );
    if (shape !== 'btree' && runs[`btree/big/${mode}`])
      for (const size of ['big', 'empty'])
        ratios[`${shape} ÷ btree, ${size}, ${mode}`] = pairedRatio(
          runs[`${shape}/${size}/${mode}`],
          runs[`btree/${size}/${mode}`],
          rate,
        );
  }
console.log('\n  ratio (msgs/s)                        median [min–max] of paired repetitions');
for (const [label, r] of Object.entries(ratios)) console.log(`  ${label.padEnd(37)} ${fmtRatio(r)}`);

const file = process.env.BENCH_OUT ?? new URL('../results/scale-shapes.json', import.meta.url);
writeFileSync(
  file,
  `${JSON.stringify(
    {
      at: new Date().toISOString(),
      commit: gitCommit(),
      machine: machine(),
      server,
      sizes: { rows: ROWS, consumers: CONSUMERS, sharedBuffers: shared, shapes: sizes },
      load,
      once,
      throughput: { reps: REPS, nMsg: N_MSG, nBatch: N_BATCH, batch: BATCH, concurrency: C, results },
      ratios: Object.fromEntries(
        Object.entries(ratios).map(([l, r]) => [
          l,
          { measured: r.median, min: r.min, max: r.max, reps: r.n },
        ]),
      ),
    },
    null,
    2,
  )}\n`,
);
log(`results: ${file instanceof URL ? file.pathname : file}`);
if (!KEEP)
  for (const shape of TABLES)
    for (const size of ['big', 'empty'])
      await pool.query(`DROP SCHEMA IF EXISTS ${schemaOf(shape, size)} CASCADE`);
else
  for (const shape of TABLES) await pool.query(`DROP SCHEMA IF EXISTS ${schemaOf(shape, 'empty')} CASCADE`);
await pool.end();
