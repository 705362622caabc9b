/**
 * once's own per-message SQL under pgbench, beside the floor's (bench/support/floor.mjs), so that
 * the PostgreSQL side of once ÷ floor can be read without Node in the way: what once's wider inbox
 * row (the SHA-256 fingerprint, status, created_at and the inbox's other indexes) and its pinned
 * settings cost in PostgreSQL, against the floor's three-column row.
 *
 * The script copies, by hand, the statements `@once/core` sends for one message in its default
 * configuration (packages/core/src/sql/inbox.ts, `beginAndClaim`): BEGIN and the claim in one
 * simple-query round trip, the claim pinning synchronous_commit and the lock timeout with
 * set_config in a one-row source, the fingerprint as a 32-byte `decode(…, 'hex')` literal; then
 * the core bench's effect; then COMMIT. A change to those statements in core should be copied
 * here. The fingerprint is a constant: PostgreSQL stores the same 32 bytes whatever they are.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** once's default retention (7 days), in ms, as once writes it. */
const RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
const FINGERPRINT_HEX = 'ab'.repeat(32);

/** once's per-message SQL for pgbench, on a schema made by `migrate` and an `effects(id, amount)` table. */
export function oncePgbenchScript(schema) {
  const pin =
    "(SELECT set_config('synchronous_commit', 'on', true), set_config('lock_timeout', '5000', true)) AS pin";
  return [
    '\\set id random(1, 1000000000000)',
    `BEGIN ISOLATION LEVEL READ COMMITTED \\; INSERT INTO ${schema}.inbox (consumer, message_id, fingerprint, status, expires_at) SELECT 'pgbench', 'pg-' || :id, decode('${FINGERPRINT_HEX}', 'hex'), 'done', now() + ${RETENTION_MS} * interval '1 millisecond' FROM ${pin} ON CONFLICT DO NOTHING;`,
    `INSERT INTO ${schema}.effects (id, amount) VALUES ('pg-' || :id, 7);`,
    'COMMIT;',
    '',
  ].join('\n');
}

/**
 * Runs `pgbench -n -f <script> -c C -j C -T seconds -M simple` once, the same command line as the
 * floor's run; returns transactions/s without the initial connection time, or throws with
 * pgbench's stderr.
 */
export function runPgbench(script, { clients, seconds, host, port, user, database }) {
  const file = path.join(os.tmpdir(), `once-pgbench-${process.pid}.sql`);
  writeFileSync(file, script);
  const args = ['-n', '-f', file, '-c', String(clients), '-j', String(clients), '-T', String(seconds)];
  args.push('-M', 'simple', '-h', host, '-p', String(port), '-U', user, database);
  const r = spawnSync('pgbench', args, { encoding: 'utf8' });
  const m = /tps = ([\d.]+) \(without initial connection time\)/.exec(r.stdout ?? '');
  if (r.status !== 0 || !m) throw new Error(`pgbench -c ${clients} failed: ${r.error?.message ?? r.stderr}`);
  return Number(m[1]);
}
