import { migrate } from '@once/core';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';
// @ts-expect-error plain JavaScript shared with the child server processes
import { createTestTables } from '../support/routes.mjs';
import { runCrashCampaign, startTwoServers, type TestServer } from '../support/two-servers.js';

// Two server processes per binding (on the built dist/: run `npm run build` first), SIGKILLed at
// random points while retrying clients send their keys; then every key's effect is counted. The
// naive route (no key) is the control: the same kills make it run effects twice.

const BINDINGS = ['fetch', 'node'];

describe.each(BINDINGS)('%s binding, two servers under SIGKILL', (binding) => {
  let pool: pg.Pool;
  let schema: string;
  let servers: [TestServer, TestServer];

  beforeAll(async () => {
    pool = createTestPool({ max: 3 });
    schema = freshSchemaName(`http_crash_${binding}`);
    await migrate(pool, { schema });
    await createTestTables(pool, schema);
    servers = await startTwoServers(binding, { HTTP_SCHEMA: schema, HTTP_LEASE_MS: '1500' });
  });
  afterAll(async () => {
    for (const s of servers ?? []) await s.kill();
    await dropSchema(pool, schema);
    await pool.end();
  });

  const countsBy = async (route: string) => {
    const { rows } = await pool.query(
      `SELECT key, count(*)::int AS n, min(seq)::text AS seq FROM "${schema}".http_effects WHERE route = $1 GROUP BY key`,
      [route],
    );
    return new Map(rows.map((r: { key: string; n: number; seq: string }) => [r.key, r]));
  };

  it("runs every key once and answers every client with its key's response", async () => {
    const keys = Array.from(
      { length: 120 },
      (_, i) => `crash-${binding}-${i}-${Math.random().toString(36).slice(2, 8)}`,
    );
    const { answers, kills } = await runCrashCampaign({
      servers,
      path: '/charges',
      keys,
      concurrency: 8,
      kills: 6,
      killEveryMs: [150, 400],
      headers: { 'x-hold-ms': '10', 'x-hold-after-commit-ms': '20' },
      dieAfterCommit: (i) => i % 10 === 0,
    });
    expect(kills).toBe(6);
    const counts = await countsBy('charges');
    const lost = keys.filter((k) => !counts.has(k));
    const duplicated = keys.filter((k) => (counts.get(k)?.n ?? 0) > 1);
    expect({ lost, duplicated }).toEqual({ lost: [], duplicated: [] });
    expect(answers).toHaveLength(keys.length);
    for (const a of answers) {
      expect(a.status).toBe(201);
      expect(a.json.key).toBe(a.key);
      // the answer is the response of the one committed run, first or replayed
      expect(String(a.json.charge)).toBe(counts.get(a.key)!.seq);
    }
    // the servers that died between COMMIT and the response: those clients got the replay
    const died = keys.filter((_, i) => i % 10 === 0);
    for (const key of died) expect(answers.find((a) => a.key === key)?.replayed, key).toBe(true);
    console.log(
      `${binding}: ${keys.length} keys, ${kills} kills, ${answers.filter((a) => a.tries > 1).length} retried, ${answers.filter((a) => a.replayed).length} replays`,
    );
  });

  it('the naive route without once duplicates effects under the same kills (the control)', async () => {
    const keys = Array.from(
      { length: 80 },
      (_, i) => `naive-${binding}-${i}-${Math.random().toString(36).slice(2, 8)}`,
    );
    await runCrashCampaign({
      servers,
      path: '/naive',
      keys,
      concurrency: 8,
      // Only the servers' own deaths between the effect and the response. Each death is caused by
      // a key whose effect committed, and that key's retry runs it again; a death also cuts other
      // requests short, so not every such key gets to die itself.
      kills: 0,
      killEveryMs: [150, 400],
      headers: { 'x-hold-ms': '60' },
      // the same crash between the effect and the response as the idempotent run's
      dieAfterCommit: (i, tries) => i % 10 === 0 && tries === 1,
    });
    const counts = await countsBy('naive');
    const duplicated = keys.filter((k) => (counts.get(k)?.n ?? 0) > 1);
    console.log(`${binding} naive: ${duplicated.length} of ${keys.length} keys ran twice or more`);
    expect(duplicated.length).toBeGreaterThan(0);
  });

  it('lease mode: after a SIGKILL mid-request the key answers 409 until the lease expires, then resumes at the first unrecorded step', async () => {
    const key = `lease-${binding}-${Math.random().toString(36).slice(2, 10)}`;
    const [a] = servers;
    const send = (extra: Record<string, string> = {}) =>
      fetch(`${a.url}/lease-charges`, {
        method: 'POST',
        headers: {
          'idempotency-key': key,
          'x-principal': 'alice',
          'content-type': 'application/json',
          ...extra,
        },
        body: JSON.stringify({ amount: 5 }),
      });
    const inFlight = send({ 'x-hold-after-a': '60000' }).catch(() => undefined);
    await a.child.waitForLine((l) => (l.json as { event?: string; key?: string })?.key === key);
    await a.kill();
    await inFlight;
    await a.start();
    const held = await send();
    expect(held.status).toBe(409);
    expect(Number(held.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    let done: Response | undefined;
    for (let i = 0; i < 100 && !done; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const res = await send();
      if (res.status === 201) done = res;
      else expect(res.status).toBe(409);
    }
    expect(done?.status).toBe(201);
    expect(((await done!.json()) as { attempt: number }).attempt).toBe(2);
    const { rows } = await pool.query(
      `SELECT step, count(*)::int AS n FROM "${schema}".http_external WHERE key = $1 GROUP BY step ORDER BY step`,
      [key],
    );
    expect(rows).toEqual([
      { step: 'a', n: 1 },
      { step: 'b', n: 1 },
    ]);
    const effects = await pool.query(
      `SELECT count(*)::int AS n FROM "${schema}".http_effects WHERE key = $1`,
      [key],
    );
    expect(effects.rows[0].n).toBe(1);
    const replay = await send();
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });
});
