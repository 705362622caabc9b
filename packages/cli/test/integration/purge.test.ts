import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { quoteIdent } from '../../../../test/support/index.js';
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

  it('an abort (Ctrl-C in bin.ts) stops between batches and says so', async () => {
    const stop = new AbortController();
    const r = await cli(at('purge', '--batch-size', '10'), {
      signal: stop.signal,
      onStderr: () => stop.abort(),
    });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`stopped: purged 10 expired rows from schema ${db.schema}`);
    expect(await remaining()).toEqual({ expired: 15, live: 5 });
  });

  it('nothing expired: no progress, 0 purged', async () => {
    await seed(0);
    const r = await cli(at('purge'));
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe(`purged 0 expired rows from schema ${db.schema}`);
  });
});
