// ORM benchmark (issue #18): once's overhead over the same ORM code without once, one ORM per
// direction. Kysely: once opens the transaction (@once/core/kysely). TypeORM: TypeORM opens it
// (@once/core/typeorm, the inbox's `transactions` option). For each, "bare" is the ORM's own
// transaction with the same insert and no dedup, "once" the bound handler through the inbox, per
// message and batched (100 messages per call; with TypeORM every message still gets its own
// transaction, as the `transactions` option does). The floor (bench/support/floor.mjs, frozen) runs
// beside them with the same effect through plain pg. Interleaved repetitions; ratios are medians of
// per-repetition paired ratios with min–max (bench/support/report.mjs).
// Size: BENCH_N messages per run (default 2000), BENCH_REPS (default 5), BENCH_CONCURRENCY (default 4).
import { writeFileSync } from 'node:fs';
import { createInbox, migrate } from '@once/core';
import { withKysely } from '@once/core/kysely';
import { withTypeorm } from '@once/core/typeorm';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { DataSource, EntitySchema } from 'typeorm';
import { createFloorTable, floorBatch, floorOne } from '../support/floor.mjs';
import { fmtRatio, gitCommit, median, pairedRatio } from '../support/report.mjs';

const N = Number(process.env.BENCH_N ?? 2000);
const REPS = Number(process.env.BENCH_REPS ?? 5);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 4);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = 'once_bench_orm';

const pool = new pg.Pool({ connectionString: DB_URL, max: CONCURRENCY + 2 });
pool.on('error', () => {});
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(pool, { schema: SCHEMA });
await pool.query(`CREATE TABLE ${SCHEMA}.effects (id text NOT NULL, amount int NOT NULL)`);
await createFloorTable(pool, SCHEMA);

const kysely = new Kysely({ dialect: new PostgresDialect({ pool }) });
const Effect = new EntitySchema({
  name: 'Effect',
  tableName: 'effects',
  schema: SCHEMA,
  columns: { id: { type: 'text', primary: true }, amount: { type: 'int' } },
});
// TypeORM owns its connections: a pool of its own, the same size.
const dataSource = await new DataSource({
  type: 'postgres',
  url: DB_URL,
  entities: [Effect],
  poolSize: CONCURRENCY + 2,
}).initialize();

const table = `${SCHEMA}.effects`;
const kyselyInsert = (db, e) => db.insertInto(table).values({ id: e.id, amount: 7 }).execute();
const typeormInsert = (m, e) => m.insert(Effect, { id: e.id, amount: 7 });

const envelope = (id) => ({
  id,
  body: Buffer.from(`{"amount":7,"id":"${id}"}`),
  headers: {},
  source: { broker: 'bench', queue: 'q' },
  attempt: 1,
  redelivered: false,
});

const inboxOf = (consumer, binding) =>
  createInbox({ pool, schema: SCHEMA, consumer, lockTimeoutMs: 30_000, ...binding });
const onceRun = (inbox) => async (envs) => {
  const outs = envs.length === 1 ? [await inbox.process(envs[0])] : await inbox.processBatch(envs);
  for (const o of outs) if (o.status !== 'processed') throw new Error(`unexpected ${o.status}`);
};

const variants = {
  'F floor/msg': {
    batch: 1,
    make: (c) => (envs) => floorOne(pool, SCHEMA, c, envs[0].id, (q) => plain(q, envs[0])),
  },
  'F floor/batch100': {
    batch: 100,
    make: (c) => (envs) => floorBatch(pool, SCHEMA, c, envs, (e) => e.id, plain),
  },
  'K kysely bare/msg': { batch: 1, make: () => kyselyBare },
  'K kysely bare/batch100': { batch: 100, make: () => kyselyBare },
  'K kysely once/msg': {
    batch: 1,
    make: (c) =>
      onceRun(
        inboxOf(
          c,
          withKysely((e, { tx }) => kyselyInsert(tx, e)),
        ),
      ),
  },
  'K kysely once/batch100': {
    batch: 100,
    make: (c) =>
      onceRun(
        inboxOf(
          c,
          withKysely((e, { tx }) => kyselyInsert(tx, e)),
        ),
      ),
  },
  'T typeorm bare/msg': { batch: 1, make: () => typeormBare },
  'T typeorm bare/batch100': { batch: 100, make: () => typeormBare },
  'T typeorm once/msg': {
    batch: 1,
    make: (c) =>
      onceRun(
        inboxOf(
          c,
          withTypeorm(dataSource, (e, { tx }) => typeormInsert(tx, e)),
        ),
      ),
  },
  'T typeorm once/batch100': {
    batch: 100,
    make: (c) =>
      onceRun(
        inboxOf(
          c,
          withTypeorm(dataSource, (e, { tx }) => typeormInsert(tx, e)),
        ),
      ),
  },
};

function plain(q, e) {
  return q.query(`INSERT INTO ${table} (id, amount) VALUES ($1, $2)`, [e.id, 7]);
}
function kyselyBare(envs) {
  return kysely.transaction().execute(async (trx) => {
    for (const e of envs) await kyselyInsert(trx, e);
  });
}
function typeormBare(envs) {
  return dataSource.transaction(async (m) => {
    for (const e of envs) await typeormInsert(m, e);
  });
}

async function drive(fn, envs, batch) {
  const chunks = [];
  for (let i = 0; i < envs.length; i += batch) chunks.push(envs.slice(i, i + batch));
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < chunks.length) await fn(chunks[next++]);
    }),
  );
  return { rate: envs.length / ((performance.now() - t0) / 1000) };
}

const runs = new Map(Object.keys(variants).map((k) => [k, []]));
let tag = 0;
for (let rep = 0; rep < REPS; rep++) {
  // Interleaved: every variant once per repetition, in a rotated order.
  const names = Object.keys(variants);
  const order = [...names.slice(rep % names.length), ...names.slice(0, rep % names.length)];
  for (const name of order) {
    const v = variants[name];
    const t = `r${tag++}`;
    const envs = Array.from({ length: N }, (_, i) => envelope(`${t}-${i}`));
    runs.get(name).push(await drive(v.make(`bench-${t}`), envs, v.batch));
  }
  await pool.query(`TRUNCATE ${table}, ${SCHEMA}.floor_inbox, ${SCHEMA}.inbox CASCADE`);
}

const rate = (r) => r.rate;
const perMsgUs = (a, b) => {
  // Added time per message in µs: 1/once − 1/bare, from the medians of each.
  const ra = median(runs.get(a).map(rate));
  const rb = median(runs.get(b).map(rate));
  return ((1 / ra - 1 / rb) * 1e6 * CONCURRENCY).toFixed(0);
};
console.log(`N=${N} REPS=${REPS} concurrency=${CONCURRENCY} (PostgreSQL at ${new URL(DB_URL).host})`);
console.log('\nvariant                     msg/s (median)');
for (const [name, rs] of runs)
  console.log(`${name.padEnd(28)}${median(rs.map(rate)).toFixed(0).padStart(8)}`);
console.log('\nonce over the same ORM code (throughput bare ÷ once: 1.00× = no overhead), beside the floor');
const rows = [
  ['kysely (once opens)', 'msg'],
  ['kysely (once opens)', 'batch100'],
  ['typeorm (ORM opens)', 'msg'],
  ['typeorm (ORM opens)', 'batch100'],
];
const summary = [];
for (const [label, shape] of rows) {
  const k = label.startsWith('kysely') ? 'K kysely' : 'T typeorm';
  const bare = runs.get(`${k} bare/${shape}`);
  const once = runs.get(`${k} once/${shape}`);
  const floorRuns = runs.get(`F floor/${shape}`);
  const overhead = pairedRatio(bare, once, rate);
  const vsFloor = pairedRatio(floorRuns, once, rate);
  summary.push({ orm: label, shape, bareOverOnce: overhead, floorOverOnce: vsFloor });
  console.log(
    `${`${label} ${shape}`.padEnd(34)} bare÷once ${fmtRatio(overhead).padEnd(20)} ` +
      `floor÷once ${fmtRatio(vsFloor).padEnd(20)} +${perMsgUs(`${k} once/${shape}`, `${k} bare/${shape}`)} µs/msg`,
  );
}
writeFileSync(
  new URL('../results/orm.json', import.meta.url),
  `${JSON.stringify(
    {
      date: new Date().toISOString().slice(0, 10),
      commit: gitCommit(),
      n: N,
      reps: REPS,
      concurrency: CONCURRENCY,
      rates: Object.fromEntries([...runs].map(([k, rs]) => [k, median(rs.map(rate))])),
      ratios: summary,
    },
    null,
    2,
  )}\n`,
);
await dataSource.destroy();
await kysely.destroy();
