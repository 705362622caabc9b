/**
 * THE FLOOR: a frozen, hand-written inbox that every consumer bench runs beside once (issue #14).
 *
 * DO NOT CHANGE THIS FILE (its SQL, its code, or the pgbench script it writes) after the commit that
 * added it. It is the fixed yardstick that once's optimisations are measured against: "once ÷ floor"
 * only means something across commits if the floor stays the same. If it is ever found to be wrong,
 * add a second, differently named baseline beside it and say so in docs/benchmarks.md; do not edit
 * this one, and do not make it slower or faster to flatter a figure.
 *
 * What it is: the least any inbox must do. One table, `floor_inbox(consumer, message_id,
 * expires_at)` with its primary key and an index on `expires_at` (so rows can be purged). Per
 * message, one simple-query round trip `BEGIN; INSERT INTO floor_inbox … ON CONFLICT DO NOTHING
 * RETURNING message_id`, then the bench's own B1 effect, then COMMIT: three round trips, like the
 * bare transaction. A conflict (a duplicate) skips the effect. No payload fingerprint, no handler
 * deadline, no failure records, no outcome objects. Batched: the same with one multi-row claim for
 * the whole batch (ids de-duplicated and sorted, so two batches never lock the same ids in
 * opposite orders), the effect for each claimed message, one COMMIT. When the effect throws, the
 * transaction is rolled back (claims included) and the error goes to the caller, which redelivers.
 * The broker is settled by the caller, after these functions return (that is, after COMMIT).
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/** How long a floor row is kept (`expires_at`); the value only matters to a purge, which the benches do not run. */
const RETENTION = "interval '7 days'";

/** Creates `<schema>.floor_inbox` and its `expires_at` index (the schema must exist). */
export async function createFloorTable(q, schema) {
  await q.query(
    `CREATE TABLE IF NOT EXISTS ${schema}.floor_inbox (consumer text, message_id text, expires_at timestamptz, PRIMARY KEY (consumer, message_id))`,
  );
  await q.query(
    `CREATE INDEX IF NOT EXISTS floor_inbox_expires_at_idx ON ${schema}.floor_inbox (expires_at)`,
  );
}

/** The claim, as literal SQL for one simple-query round trip together with BEGIN. */
function claimSql(schema, consumer, ids) {
  const c = pg.escapeLiteral(consumer);
  const values = ids.map((id) => `(${c}, ${pg.escapeLiteral(id)}, now() + ${RETENTION})`).join(', ');
  return `BEGIN; INSERT INTO ${schema}.floor_inbox (consumer, message_id, expires_at) VALUES ${values} ON CONFLICT DO NOTHING RETURNING message_id`;
}

async function rollback(client, err) {
  try {
    await client.query('ROLLBACK');
    client.release();
  } catch (e) {
    client.release(e);
  }
  throw err;
}

/**
 * One message: claim and BEGIN in one round trip, `effect(client)` if the claim took, COMMIT.
 * Returns 'processed' or 'duplicate'.
 */
export async function floorOne(pool, schema, consumer, id, effect) {
  const client = await pool.connect();
  let claimed;
  try {
    const res = await client.query(claimSql(schema, consumer, [id]));
    claimed = res[1].rowCount === 1;
    if (claimed) await effect(client);
    await client.query('COMMIT');
  } catch (err) {
    return rollback(client, err);
  }
  client.release();
  return claimed ? 'processed' : 'duplicate';
}

/**
 * A batch: one multi-row claim, `effect(client, item)` for each item whose id it took (the first
 * of several items with one id), COMMIT. Returns how many items ran their effect.
 */
export async function floorBatch(pool, schema, consumer, items, idOf, effect) {
  const ids = [...new Set(items.map(idOf))].sort();
  const client = await pool.connect();
  let ran = 0;
  try {
    const res = await client.query(claimSql(schema, consumer, ids));
    const claimed = new Set(res[1].rows.map((r) => r.message_id));
    for (const item of items) {
      if (!claimed.delete(idOf(item))) continue;
      await effect(client, item);
      ran++;
    }
    await client.query('COMMIT');
  } catch (err) {
    return rollback(client, err);
  }
  client.release();
  return ran;
}

/**
 * The same SQL as floorOne for pgbench, with the core bench's effect (`effects(id, amount)`,
 * no index). `\;` keeps BEGIN and the claim in one round trip; the id is pgbench's random().
 * pgbench cannot skip the effect on a conflict; over 10^12 ids there is none to skip.
 */
export function floorPgbenchScript(schema) {
  return [
    '\\set id random(1, 1000000000000)',
    `BEGIN \\; INSERT INTO ${schema}.floor_inbox (consumer, message_id, expires_at) VALUES ('pgbench', 'pg-' || :id, now() + ${RETENTION}) ON CONFLICT DO NOTHING;`,
    `INSERT INTO ${schema}.effects (id, amount) VALUES ('pg-' || :id, 7);`,
    'COMMIT;',
    '',
  ].join('\n');
}

/**
 * Runs `pgbench -n -f floor.sql -c C -j C -T seconds -M simple` against `database` on host:port for
 * each C; returns [{ clients, tps }] (tps without the initial connection time), or throws with
 * pgbench's stderr.
 */
export function runFloorPgbench({ schema, clients, seconds, host, port, user, database }) {
  const file = path.join(os.tmpdir(), `once-floor-${process.pid}.sql`);
  writeFileSync(file, floorPgbenchScript(schema));
  return clients.map((c) => {
    const args = ['-n', '-f', file, '-c', String(c), '-j', String(c), '-T', String(seconds), '-M', 'simple'];
    args.push('-h', host, '-p', String(port), '-U', user, database);
    const r = spawnSync('pgbench', args, { encoding: 'utf8' });
    const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(r.stdout ?? '');
    if (r.status !== 0 || !m) throw new Error(`pgbench -c ${c} failed: ${r.error?.message ?? r.stderr}`);
    return { clients: c, tps: Number(m[1]) };
  });
}
