// What rounds in flight do to each other's claims (issue #27, item 3). Two readings, with the
// relay's own statements as built (packages/core/src/sql/outbox.ts; `npm run build` first):
//  1. EXPLAIN (ANALYZE, BUFFERS) of the claim while 0 to 3 other transactions each hold a claimed
//     batch of 100 rows: the rows the claim's scan visits and the buffers it touches.
//  2. 4 and 8 claim loops draining the backlog at once (claim, a 2 ms "publish", delete and
//     commit), every connection with lock_timeout = 1 ms: a claim that waited on a lock would fail
//     with 55P03 and be counted.
// BENCH_ROWS (default 20,000) rows over BENCH_KEYS (default 1,000) keys. Prints a table; no file.
import { migrate } from '@once/core';
import pg from 'pg';
import { outboxSql } from '../../packages/core/dist/sql/outbox.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 20_000);
const KEYS = Number(process.env.BENCH_KEYS ?? 1_000);
const REPS = 15;
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = 'bench_claim_contention';
const sql = outboxSql(SCHEMA);

const setup = new pg.Pool({ connectionString: DB_URL, max: 2 });

async function backlog() {
  await setup.query(`DELETE FROM ${SCHEMA}.outbox`);
  await setup.query(
    `INSERT INTO ${SCHEMA}.outbox (destination, key, body)
     SELECT 'd', 'k' || (i % $2), 'x' FROM generate_series(1, $1) i`,
    [ROWS, KEYS],
  );
  await setup.query(`VACUUM ANALYZE ${SCHEMA}.outbox`);
}

async function client(options) {
  const c = new pg.Client({ connectionString: DB_URL, ...options });
  await c.connect();
  return c;
}

const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const last = (r) => (Array.isArray(r) ? r[r.length - 1] : r);

await setup.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(setup, { schema: SCHEMA });
await backlog();

console.log(`claim of 100 while other rounds hold rows (${ROWS} rows, ${KEYS} keys, median of ${REPS})`);
console.log('| rows held by others | claim ms | rows the scan visits | buffer hits | rows claimed |');
console.log('|---|---|---|---|---|');
// The claim alone, for EXPLAIN: the statement after BEGIN and the pinned setting.
const claim = sql.beginAndClaim(100).split('; ').slice(2).join('; ');
const holders = [];
for (let k = 0; k <= 3; k++) {
  if (k > 0) {
    const h = await client();
    await h.query(sql.beginAndClaim(100));
    holders.push(h);
  }
  const b = await client();
  const ms = [];
  const visited = [];
  const hits = [];
  const got = [];
  for (let i = 0; i < REPS; i++) {
    await b.query('BEGIN');
    const plan = (await b.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${claim}`)).rows[0]['QUERY PLAN'][0];
    await b.query('ROLLBACK');
    let scanned = 0;
    const walk = (n) => {
      // The outer scan of the outbox (not the per-key subplan's probes).
      if (n['Relation Name'] === 'outbox' && n['Parent Relationship'] !== 'SubPlan')
        scanned += n['Actual Rows'] * n['Actual Loops'] + (n['Rows Removed by Filter'] ?? 0);
      if (n['Parent Relationship'] !== 'SubPlan') for (const c of n.Plans ?? []) walk(c);
    };
    walk(plan.Plan);
    ms.push(plan['Execution Time']);
    visited.push(scanned);
    hits.push(plan.Plan['Shared Hit Blocks']);
    got.push(plan.Plan['Actual Rows']);
  }
  console.log(
    `| ${k * 100} | ${median(ms).toFixed(2)} | ${median(visited)} | ${median(hits)} | ${median(got)} |`,
  );
  await b.end();
}
for (const h of holders) {
  await h.query('ROLLBACK');
  await h.end();
}

console.log('\nclaim loops draining the backlog, lock_timeout = 1 ms on every connection');
console.log(
  '| loops | rows | claims | claims that found nothing | lock timeouts (55P03) | other errors | ms |',
);
console.log('|---|---|---|---|---|---|---|');
for (const loops of [4, 8]) {
  await backlog();
  let claims = 0;
  let empty = 0;
  let rows = 0;
  let lockTimeouts = 0;
  let errors = 0;
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: loops }, async () => {
      const c = await client({ options: '-c lock_timeout=1' });
      for (;;) {
        try {
          const got = last(await c.query(sql.beginAndClaim(100))).rows;
          claims++;
          if (got.length === 0) {
            await c.query('COMMIT');
            const left = await c.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.outbox`);
            if (left.rows[0].n === 0) break;
            empty++;
            continue;
          }
          rows += got.length;
          await new Promise((r) => setTimeout(r, 2));
          await c.query(sql.deleteSentAndCommit(got.map((r) => r.seq)));
        } catch (err) {
          if (err.code === '55P03') lockTimeouts++;
          else errors++;
          await c.query('ROLLBACK').catch(() => {});
        }
      }
      await c.end();
    }),
  );
  console.log(
    `| ${loops} | ${rows} | ${claims} | ${empty} | ${lockTimeouts} | ${errors} | ${Date.now() - t0} |`,
  );
}

await setup.query(`DROP SCHEMA ${SCHEMA} CASCADE`);
await setup.end();
