// Purge step plan bench, opt-in: `node bench/core/purge-plan.mjs` (after `npm run build`).
// What one purge step of 1,000 rows costs the server (EXPLAIN ANALYZE's execution time, TIMING
// OFF), by how lease mode's durable steps of the deleted rows are removed:
//   cascade  the purge statement of schema version 8 and earlier, with the steps table's foreign
//            key (ON DELETE CASCADE: a trigger query per deleted inbox row);
//   join     purge's statement now (schema 9: no foreign key; the statement deletes the steps of
//            the deleted rows marked has_steps, joined in a data-modifying CTE);
//   none     version 8's statement without the foreign key: removes no steps (the floor, not a
//            valid purge).
// Loads BENCH_PLAN_ROWS (default 1,000,000) expired rows over 10 consumers into its own schema
// (BENCH_PLAN_SCHEMA, default once_purge_plan), then three phases: the steps table empty; holding
// BENCH_PLAN_STEPS rows (default 100,000: one for every k-th inbox row in expiry order, so a
// step meets about 1,000 × STEPS / ROWS of them) with those inbox rows marked has_steps, as lease
// mode's step record marks them; and the same with every inbox row marked, as rows older than
// migration 9 are. In each phase BENCH_PLAN_REPS steps (default 21) of each variant, rotated,
// after BENCH_PLAN_WARM unrecorded ones (default 3), the foreign key added (NOT VALID) or dropped
// before each step as its variant needs (a re-added key is primed with a one-row delete, so its
// trigger's query is planned before the step); every step commits, walking the expiry index on
// from the last (keyset, as purge does). Reports the median [min–max] per variant and the paired
// difference to `none`, the trigger's time and the plan of the steps delete (one step each with
// TIMING ON). Results: bench/results/purge-plan.json. The schema is dropped at the end.
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { migrate } from '@once/core';
import pg from 'pg';
import { inboxSql } from '../../packages/core/dist/sql/inbox.js';
import { gitCommit, median } from '../support/report.mjs';

const ROWS = Number(process.env.BENCH_PLAN_ROWS ?? 1_000_000);
const STEPS = Number(process.env.BENCH_PLAN_STEPS ?? 100_000);
const REPS = Number(process.env.BENCH_PLAN_REPS ?? 21);
const WARM = Number(process.env.BENCH_PLAN_WARM ?? 3);
const BATCH = 1000;
const SCHEMA = process.env.BENCH_PLAN_SCHEMA ?? 'once_purge_plan';
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const VARIANTS = ['cascade', 'join', 'none'];
const need = 3 * VARIANTS.length * (REPS + WARM) * BATCH + BATCH;
if (need > ROWS)
  throw new Error(`BENCH_PLAN_ROWS ${ROWS} is too few for ${REPS} + ${WARM} steps: need ${need}`);

const client = new pg.Client({ connectionString: DB_URL });
await client.connect();
const q = async (text) => (await client.query(text)).rows;
const inbox = `${SCHEMA}.inbox`;
const steps = `${SCHEMA}.steps`;
const FK = 'steps_consumer_message_id_fkey';

// ---- load
await q(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
{
  const pool = new pg.Pool({ connectionString: DB_URL, max: 1 });
  await migrate(pool, { schema: SCHEMA });
  await pool.end();
}
const CHUNK = 200_000;
for (let from = 1; from <= ROWS; from += CHUNK) {
  const to = Math.min(ROWS, from + CHUNK - 1);
  await q(`INSERT INTO ${inbox} (consumer, message_id, fingerprint, status, created_at, expires_at)
    SELECT 'c' || (g % 10), gen_random_uuid()::text, '\\x00'::bytea, 'done', now() - interval '8 days',
      now() - interval '1 day' - ${ROWS} * interval '1 millisecond' + g * interval '1 millisecond'
    FROM generate_series(${from}, ${to}) AS g`);
}
await q(`VACUUM ANALYZE ${inbox}`);

// ---- the statements
/** Version 8's purge step (packages/core/src/sql/inbox.ts before migration 9). */
const v8Step = (
  fromUs,
) => `WITH pin AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS off),
    doomed AS (DELETE FROM ${inbox} WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM ${inbox} WHERE expires_at >= ('epoch'::timestamptz + ${fromUs - 1} * interval '1 microsecond') AND expires_at < now()
        ORDER BY expires_at LIMIT ${BATCH} FOR UPDATE SKIP LOCKED))
      RETURNING expires_at)
    SELECT count(*)::int AS n, (extract(epoch FROM max(expires_at)) * 1000000)::bigint::text AS last_us
    FROM doomed, pin`;
const sql = inboxSql(SCHEMA);
const statement = { cascade: v8Step, join: (fromUs) => sql.purgeStep(BATCH, fromUs), none: v8Step };

let hasFk =
  (await q(`SELECT 1 FROM pg_constraint WHERE conname = '${FK}' AND conrelid = '${steps}'::regclass`))
    .length > 0;
async function foreignKey(on) {
  if (on === hasFk) return;
  await q(
    on
      ? `ALTER TABLE ${steps} ADD CONSTRAINT ${FK} FOREIGN KEY (consumer, message_id) REFERENCES ${inbox} (consumer, message_id) ON DELETE CASCADE NOT VALID`
      : `ALTER TABLE ${steps} DROP CONSTRAINT ${FK}`,
  );
  // A new constraint's trigger plans its query at its first call: prime it with one row, as a
  // long-lived foreign key has it planned already.
  if (on)
    await q(`DELETE FROM ${inbox} WHERE ctid = (SELECT ctid FROM ${inbox} ORDER BY expires_at LIMIT 1)`);
  hasFk = on;
}
const nextFromUs = async () =>
  Number(
    (await q(`SELECT (extract(epoch FROM min(expires_at)) * 1000000)::bigint::text AS us FROM ${inbox}`))[0]
      .us,
  );

/** One committed step of `variant`; its server times in ms, and the plan when `timing`. */
async function step(variant, timing = false) {
  await foreignKey(variant === 'cascade');
  const fromUs = await nextFromUs();
  const [row] = await q(
    `EXPLAIN (ANALYZE, TIMING ${timing ? 'ON' : 'OFF'}, FORMAT JSON) ${statement[variant](fromUs)}`,
  );
  const plan = row['QUERY PLAN'][0];
  return { ms: plan['Execution Time'], plan: timing ? plan : undefined };
}

/** The node that deletes from steps, and what feeds it, as text. */
function stepsNode(plan) {
  const lines = [];
  const walk = (node, depth, inSteps) => {
    const here = inSteps || (node['Node Type'] === 'ModifyTable' && node['Relation Name'] === 'steps');
    if (here) {
      const t = node['Actual Total Time'] === undefined ? '' : ` actual ${node['Actual Total Time']} ms`;
      lines.push(
        `${'  '.repeat(depth)}${node['Node Type']}${node['Index Name'] ? ` using ${node['Index Name']}` : ''}${node['Relation Name'] ? ` on ${node['Relation Name']}` : ''} rows=${node['Actual Rows']} loops=${node['Actual Loops']}${t}`,
      );
    }
    for (const c of node.Plans ?? []) walk(c, here ? depth + 1 : depth, here);
  };
  walk(plan.Plan, 0, false);
  return lines.join('\n');
}

const spread = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length });
const fmt = (s) => `${s.median.toFixed(2)} ms [${s.min.toFixed(2)}–${s.max.toFixed(2)}]`;

async function phase(name) {
  const times = Object.fromEntries(VARIANTS.map((v) => [v, []]));
  for (let r = 0; r < WARM; r++) for (const v of VARIANTS) await step(v);
  for (let r = 0; r < REPS; r++) {
    // Rotated, so no variant always follows the same one.
    const order = VARIANTS.map((_, i) => VARIANTS[(i + r) % VARIANTS.length]);
    for (const v of order) times[v].push((await step(v)).ms);
  }
  // One step of each with TIMING ON: the trigger's time, and the plan of the join's steps delete.
  const cascade = (await step('cascade', true)).plan;
  const plan = stepsNode((await step('join', true)).plan);
  const out = { variants: {} };
  for (const v of VARIANTS) {
    out.variants[v] = { ms: spread(times[v]) };
    // Paired: the three variants of a repetition ran one after the other.
    if (v !== 'none') out.variants[v].overNoneMs = spread(times[v].map((t, i) => t - times.none[i]));
  }
  out.cascadeTriggerMsTimed = (cascade.Triggers ?? []).reduce((s, t) => s + t.Time, 0);
  out.joinPlan = plan;
  console.log(`\n${name}:`);
  for (const v of VARIANTS) {
    const over = out.variants[v].overNoneMs;
    console.log(
      `  ${v.padEnd(8)} ${fmt(out.variants[v].ms)}${over ? `; over none ${fmt(over)} = ${((over.median * 1000) / BATCH).toFixed(2)} µs per row` : ''}`,
    );
  }
  console.log(`  cascade's trigger in one step with TIMING ON: ${out.cascadeTriggerMsTimed.toFixed(2)} ms`);
  console.log(`  join's steps delete (TIMING ON):\n${plan.replace(/^/gm, '    ')}`);
  return out;
}

console.log(
  `purge plan bench: ${ROWS.toLocaleString('en')} expired rows, steps of ${BATCH}, ${REPS} recorded (+${WARM} warm-up) per variant per phase; load ${os.loadavg()[0].toFixed(2)}`,
);
const empty = await phase('steps empty');
// Steps for every k-th row of what is left, in expiry order, their rows marked as a step record
// marks them.
const [{ n: left }] = await q(`SELECT count(*)::int AS n FROM ${inbox}`);
const every = Math.max(1, Math.floor(left / STEPS));
await q(`INSERT INTO ${steps} (consumer, message_id, step, seq, attempt, result)
  SELECT consumer, message_id, 'charge', 1, 1, '{"id": 1}'::jsonb
  FROM (SELECT consumer, message_id, row_number() OVER (ORDER BY expires_at) AS k FROM ${inbox}) AS r
  WHERE k % ${every} = 0`);
await q(`UPDATE ${inbox} AS i SET has_steps = true FROM ${steps} AS s
  WHERE i.consumer = s.consumer AND i.message_id = s.message_id`);
await q(`VACUUM ANALYZE ${steps}`);
await q(`VACUUM ANALYZE ${inbox}`);
const [{ n: stepRows }] = await q(`SELECT count(*)::int AS n FROM ${steps}`);
const marked = await phase(
  `steps holding ${stepRows.toLocaleString('en')} rows (one per ${every} inbox rows), those rows marked has_steps`,
);
await q(`UPDATE ${inbox} SET has_steps = true WHERE NOT has_steps`);
await q(`VACUUM ANALYZE ${inbox}`);
const all = await phase('the same, every inbox row marked (rows older than migration 9)');

await q(`DROP SCHEMA ${SCHEMA} CASCADE`);
await client.end();
writeFileSync(
  new URL('../results/purge-plan.json', import.meta.url),
  `${JSON.stringify(
    {
      what: 'one purge step of 1,000 expired rows, server time (EXPLAIN ANALYZE, TIMING OFF): steps removed by the foreign key cascade (cascade, schema 8), by the statement for rows marked has_steps (join, schema 9), or not at all (none)',
      at: new Date().toISOString(),
      commit: gitCommit(),
      rows: ROWS,
      reps: REPS,
      cpus: os.cpus().length,
      loadavg: os.loadavg(),
      stepsEmpty: empty,
      stepsMarked: { rows: stepRows, everyKth: every, ...marked },
      stepsAllMarked: { rows: stepRows, everyKth: every, ...all },
    },
    null,
    1,
  )}\n`,
);
