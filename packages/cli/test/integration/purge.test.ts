import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { quoteIdent, serviceEnv } from '../../../../test/support/index.js';
import { cli, freshOnce } from './fixtures/cli.js';

let db: Awaited<ReturnType<typeof freshOnce>>;
const at = (...args: string[]) => ['--schema', db.schema, ...args];

/** `expired` rows past their expiry and 5 live ones, for consumer `p`, replacing what was there. */
async function seed(expired: number): Promise<void> {
  const inbox = `${quoteIdent(db.schema)}.inbox`;
  await db.pool.query(`DELETE FROM ${inbox}`);
  await db.pool.query(
    `INSERT INTO ${inbox} (consumer, message_id, fingerprint, status, expires_at)
     SELECT 'p', 'old-' || g, '\\x00'::bytea, 'done', now() - interval '1 minute' FROM generate_series(1, $1::int) g
     UNION ALL
     SELECT 'p', 'live-' || g, '\\x00'::bytea, 'done', now() + interval '1 day' FROM generate_series(1, 5) g`,
    [expired],
  );
}

async function remaining(): Promise<{ expired: number; live: number }> {
  const r = await db.pool.query<{ expired: number; live: number }>(
    `SELECT count(*) FILTER (WHERE expires_at < now())::int AS expired, count(*) FILTER (WHERE expires_at >= now())::int AS live
     FROM ${quoteIdent(db.schema)}.inbox`,
  );
  return r.rows[0] ?? { expired: -1, live: -1 };
}

beforeAll(async () => {
  db = await freshOnce('cli_purge');
});
afterAll(async () => {
  await db.close();
});
beforeEach(async () => {
  await seed(25);
});

describe('once purge', () => {
  it('not a terminal: plain progress lines on stderr, the total on stdout; live rows stay', async () => {
    const r = await cli(at('purge', '--batch-size', '10'));
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`purged 25 expired rows from schema ${db.schema}`);
    const lines = r.stderr.trim().split('\n');
    // The first batch prints at once; later ones are throttled to one a second; the end always prints.
    expect(lines[0]).toBe('purged 10/25 rows');
    expect(lines.at(-1)).toBe('purged 25/25 rows');
    expect(r.stderr).not.toContain('\r');
    expect(await remaining()).toEqual({ expired: 0, live: 5 });
  });

  it('a terminal: a bar redrawn in place, ending at 100% and a newline', async () => {
    const r = await cli(at('purge', '--batch-size', '10'), { tty: true });
    expect(r.code).toBe(0);
    const frames = r.stderr.split('\r').filter(Boolean);
    expect(frames.length).toBeGreaterThanOrEqual(3);
    expect(frames[0]).toMatch(/^\[#{12}\.{18}\] {2}40% 10\/25 rows$/);
    expect(frames.at(-1)).toBe(`[${'#'.repeat(30)}] 100% 25/25 rows\n`);
    expect(await remaining()).toEqual({ expired: 0, live: 5 });
  });

  it('--json: one document, no progress', async () => {
    const r = await cli(at('--json', 'purge', '--batch-size', '7'));
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.json()).toEqual({ schema: db.schema, deleted: 25, expiredBefore: 25, stopped: false });
  });

  it('--max-rows bounds the work', async () => {
    const r = await cli(at('--json', 'purge', '--batch-size', '5', '--max-rows', '7'));
    expect(r.json()).toMatchObject({ deleted: 7, expiredBefore: 25 });
    expect(await remaining()).toEqual({ expired: 18, live: 5 });
  });

  it('--rows-per-second: a few thousand rows at a small rate are all purged, and the cap is reported', async () => {
    await seed(3000);
    // 3000 rows at 1500/s: at least two seconds of throttling, which is not asserted (shared machine).
    const r = await cli(at('--json', 'purge', '--batch-size', '250', '--rows-per-second', '1500'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toEqual({
      schema: db.schema,
      deleted: 3000,
      expiredBefore: 3000,
      stopped: false,
      rowsPerSecond: 1500,
    });
    expect(await remaining()).toEqual({ expired: 0, live: 5 });

    await seed(40);
    const t = await cli(at('purge', '--batch-size', '20', '--rows-per-second', '1000'));
    expect(t.code).toBe(0);
    expect(t.stdout.trim()).toBe(`purged 40 expired rows from schema ${db.schema} at most 1000 rows/s`);
  }, 30_000);

  it('--rows-per-second must be a whole number >= 1: a bad value is a usage error naming the flag, nothing purged', async () => {
    for (const bad of ['0', '-5', '1.5', 'fast', '']) {
      const r = await cli(at('purge', '--rows-per-second', bad));
      expect(r.code, bad).toBe(2);
      expect(r.stderr, bad).toContain('--rows-per-second');
      expect(r.stderr, bad).toContain(`must be a whole number >= 1, got ${JSON.stringify(bad)}`);
    }
    expect(await remaining()).toEqual({ expired: 25, live: 5 });
  });

  it('an abort (Ctrl-C in bin.ts) stops between batches, says so and exits 130; SIGTERM 143', async () => {
    const stop = new AbortController();
    const r = await cli(at('purge', '--batch-size', '10'), {
      signal: stop.signal,
      onStderr: () => stop.abort('SIGINT'),
    });
    expect(r.code).toBe(130);
    expect(r.stdout.trim()).toBe(`stopped: purged 10 expired rows from schema ${db.schema}`);
    expect(await remaining()).toEqual({ expired: 15, live: 5 });

    // SIGTERM (bin.ts aborts with the signal's name) is 143.
    await seed(25);
    const aborted = new AbortController();
    aborted.abort('SIGTERM');
    const t = await cli(at('--json', 'purge'), { signal: aborted.signal });
    expect(t.code).toBe(143);
    expect(t.json()).toMatchObject({ stopped: true, deleted: 0 });
  });

  it('nothing expired: no progress, 0 purged', async () => {
    await seed(0);
    const r = await cli(at('purge'));
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe(`purged 0 expired rows from schema ${db.schema}`);
  });

  it('the built bin, Ctrl-C (SIGINT) mid-purge: stops between batches, reports, exits 130', async () => {
    await seed(200);
    const bin = fileURLToPath(new URL('../../dist/bin.js', import.meta.url));
    const child = spawn(
      process.execPath,
      [bin, '--schema', db.schema, 'purge', '--batch-size', '10', '--pause-ms', '300'],
      {
        env: { ...process.env, DATABASE_URL: serviceEnv('DATABASE_URL') },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      // After the first batch, during its pause: the purge is under way.
      if (stderr.includes('purged 10/200 rows') && !child.killed) child.kill('SIGINT');
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(code, stderr).toBe(130);
    expect(stderr).toContain('once: interrupted, stopping');
    const purged = Number(/^stopped: purged (\d+) expired rows/.exec(stdout)?.[1]);
    expect(purged).toBeGreaterThanOrEqual(10);
    expect(purged).toBeLessThan(200);
    // Stopped between batches: exactly what it reported is gone.
    expect(await remaining()).toEqual({ expired: 200 - purged, live: 5 });
  }, 30_000);
});
