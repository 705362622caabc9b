import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Child } from '../../../../test/support/child.js';
import { freshDb } from '../../../../test/support/index.js';
import { type ExternalService, startExternalService } from './fixtures/external-service.js';

// SIGKILL a lease-mode worker inside each step, between steps and around `done`; then redeliver.
// Children run the built dist/ (run `npx tsc -b packages/core` first).
const CHILD = fileURLToPath(new URL('./fixtures/lease-child.mjs', import.meta.url));
// Long enough that a worker starved of CPU (eleven start at once) still renews in time.
const LEASE_MS = 3000;
const STEPS = ['a', 'b', 'c'] as const;
const POINTS = [
  ...STEPS.flatMap((s) => [`in-${s}`, `called-${s}`, `after-${s}`]),
  'before-done',
  'after-done',
] as const;

let db: Awaited<ReturnType<typeof freshDb>>;
let service: ExternalService;
const children: Child[] = [];

beforeAll(async () => {
  db = await freshDb('core_lease_crash', 8);
  service = await startExternalService();
});
afterAll(async () => {
  for (const c of children) await c.kill();
  await service?.close();
  await db?.close();
});

type Job = { id: string; mode: 'steps' | 'naive'; killAt: string };

function child(jobs: Job[]): Child {
  const c = new Child({
    script: CHILD,
    args: [JSON.stringify({ schema: db.schema, url: service.url, leaseMs: LEASE_MS, jobs })],
  });
  children.push(c);
  return c.start();
}

/** Runs one delivery and SIGKILLs the worker when it reaches `job.killAt`. */
async function killAt(job: Job): Promise<void> {
  const c = child([job]);
  try {
    await c.waitForLine((l) => l.text === `at:${job.killAt}`);
  } catch (err) {
    throw new Error(
      `${job.id}: ${(err as Error).message}; stdout: ${c.lines.map((l) => l.text).join(' | ')}`,
    );
  }
  await c.kill('SIGKILL');
}

/** Redelivers every job in a fresh worker (once the dead workers' leases ran out) and returns the outcomes. */
async function redeliver(jobs: Job[]): Promise<Map<string, string>> {
  const c = child(jobs.map((j) => ({ ...j, killAt: 'none' })));
  await c.waitForExit(60_000);
  const out = new Map<string, string>();
  for (const l of c.lines) {
    const j = l.json as { id?: string; status?: string } | undefined;
    if (j?.id) out.set(j.id, j.status ?? '');
  }
  if (out.size !== jobs.length) throw new Error(`redelivery incomplete: ${c.stderr}`);
  return out;
}

it('SIGKILL in and between steps: each recorded step called once, the final effect once', async () => {
  const jobs: Job[] = POINTS.map((p) => ({ id: `m-${p}`, mode: 'steps', killAt: p }));
  // One worker per kill point, killed where it stands.
  await Promise.all(jobs.map(killAt));
  // A takeover needs the dead worker's lease to run out (one clock: the database's).
  await new Promise((r) => setTimeout(r, LEASE_MS + 200));
  const outcomes = await redeliver(jobs);

  const effects = await db.counts();
  const report: Record<string, unknown> = {};
  for (const { id, killAt } of jobs) {
    report[id] = {
      outcome: outcomes.get(id),
      calls: STEPS.map((s) => service.calls(id, s)),
      effect: effects.get(id),
    };
    expect(outcomes.get(id), id).toBe(killAt === 'after-done' ? 'duplicate' : 'processed');
    expect(effects.get(id), `${id}: final effect`).toBe(1);
    for (const s of STEPS) {
      // Killed after the call returned but before its result was recorded: the one window
      // durable steps cannot close. The step runs again, with the same idempotency key, so a
      // provider that honours keys makes the effect once.
      const inWindow = killAt === `called-${s}`;
      expect(service.calls(id, s), `${id}: calls of step ${s}`).toBe(inWindow ? 2 : 1);
      expect(service.effects(id, s), `${id}: keyed effects of step ${s}`).toBe(1);
    }
  }
  const rows = await db.pool.query<{ message_id: string; n: number; attempts: number }>(
    `SELECT s.message_id, count(*)::int AS n, max(i.attempts) AS attempts
       FROM ${db.schema}.steps s JOIN ${db.schema}.inbox i USING (consumer, message_id)
      GROUP BY s.message_id`,
  );
  expect(rows.rows.length).toBe(jobs.length);
  for (const r of rows.rows) {
    expect(r.n).toBe(3);
    // The takeover counted an attempt (after-done finished on the first).
    expect(r.attempts).toBe(r.message_id === 'm-after-done' ? 1 : 2);
  }
  console.log('lease crash matrix', report);
});

it('control: a handler calling the service without steps repeats earlier calls after the same kill', async () => {
  const job: Job = { id: 'naive-1', mode: 'naive', killAt: 'after-b' };
  await killAt(job);
  await new Promise((r) => setTimeout(r, LEASE_MS + 200));
  expect((await redeliver([job])).get(job.id)).toBe('processed');
  expect(service.calls(job.id, 'a')).toBe(2);
  expect(service.calls(job.id, 'b')).toBe(2);
  expect(service.calls(job.id, 'c')).toBe(1);
});
