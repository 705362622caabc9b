import { PermanentError } from '@once/core';
import { compatibleFrom, LATEST_SCHEMA_VERSION, MIGRATIONS } from '@once/core/admin';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName, quoteIdent } from '../../../../test/support/index.js';
import { cli, envelope, freshOnce, installUpTo } from './fixtures/cli.js';

// The oldest code that runs on the latest schema (9: migration 9 contracted).
const FROM = compatibleFrom(MIGRATIONS, LATEST_SCHEMA_VERSION);

describe('once migrate', () => {
  const pool = createTestPool({ max: 2 });
  const schema = freshSchemaName('cli_migrate');
  afterAll(async () => {
    await dropSchema(pool, schema);
    await pool.end();
  });

  it('installs from nothing, then says it is up to date', async () => {
    const first = await cli(['migrate', '--schema', schema]);
    expect(first.code).toBe(0);
    expect(first.stdout.trim()).toBe(
      `schema ${schema} migrated from version 0 to ${LATEST_SCHEMA_VERSION}; compatible from version ${FROM}`,
    );
    const tables = await pool.query<{ t: string }>(
      `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`,
      [schema],
    );
    expect(tables.rows.map((r) => r.t)).toEqual(
      expect.arrayContaining(['inbox', 'outbox', 'schema_version']),
    );
    const again = await cli(['migrate', '--schema', schema]);
    expect(again.stdout.trim()).toBe(
      `schema ${schema} is up to date (version ${LATEST_SCHEMA_VERSION}; compatible from version ${FROM})`,
    );
    const json = await cli(['--json', 'migrate', '--schema', schema]);
    expect(json.json()).toEqual({
      schema,
      from: LATEST_SCHEMA_VERSION,
      to: LATEST_SCHEMA_VERSION,
      compatibleFrom: FROM,
      changed: false,
    });
  });

  it('upgrades a database left at version 1', async () => {
    const v1 = freshSchemaName('cli_migrate_v1');
    try {
      await installUpTo(pool, v1, 1);
      const r = await cli(['--json', '--schema', v1, 'migrate']);
      expect(r.code).toBe(0);
      expect(r.json()).toMatchObject({
        from: 1,
        to: LATEST_SCHEMA_VERSION,
        compatibleFrom: FROM,
        changed: true,
      });
      expect((await cli(['--schema', v1, 'outbox', 'status'])).code).toBe(0);
    } finally {
      await dropSchema(pool, v1);
    }
  });
});

describe('once status', () => {
  let db: Awaited<ReturnType<typeof freshOnce>>;
  let outboxSql: string;
  beforeAll(async () => {
    db = await freshOnce('cli_status');
    const ok = async () => ({ ok: true });
    await db.process(
      'orders',
      ok,
      ['o1', 'o2', 'o3'].map((id) => envelope(id)),
    );
    await db.process('orders', async () => {
      throw new PermanentError('bad order');
    }, [envelope('o4')]);
    await db.process('billing', ok, [envelope('b1'), envelope('b2')]);
    const q = quoteIdent(db.schema);
    // One processed row past its expiry and the oldest of its consumer by an hour.
    await db.pool.query(
      `UPDATE ${q}.inbox SET expires_at = now() - interval '1 minute', created_at = now() - interval '1 hour'
       WHERE consumer = 'billing' AND message_id = 'b1'`,
    );
    outboxSql = `INSERT INTO ${q}.outbox (destination, body, status, created_at) VALUES ($1, $2, $3, now() - $4 * interval '1 second')`;
    const rows: [string, string, number][] = [
      ['topic-a', 'pending', 120],
      ['topic-a', 'pending', 5],
      ['topic-a', 'sent', 600],
      ['topic-a', 'failed', 30],
      ['topic-b', 'sent', 1],
      ['topic-b', 'pending', 7200],
    ];
    for (const [d, s, age] of rows) await db.pool.query(outboxSql, [d, Buffer.from('x'), s, age]);
  });
  afterAll(async () => {
    await db.close();
  });

  it('--json: version, inbox per consumer, outbox per destination with the oldest pending age', async () => {
    const r = await cli(['--json', '--schema', db.schema, 'status']);
    expect(r.code).toBe(0);
    const s = r.json<{
      version: number;
      upToDate: boolean;
      inbox: { consumers: Record<string, unknown>[]; totals: Record<string, number> };
      outbox: {
        destinations: { destination: string; oldestPendingAgeSeconds: number }[];
        totals: Record<string, number>;
      };
    }>();
    expect(s).toMatchObject({
      version: LATEST_SCHEMA_VERSION,
      status: 'current',
      compatibleFrom: FROM,
      upToDate: true,
    });
    expect(s.inbox.consumers).toHaveLength(2);
    expect(s.inbox.consumers[0]).toMatchObject({
      consumer: 'billing',
      rows: 2,
      done: 2,
      failed: 0,
      expired: 1,
    });
    expect(s.inbox.consumers[0]?.oldestAgeSeconds).toBeGreaterThanOrEqual(3600);
    expect(s.inbox.consumers[1]).toMatchObject({
      consumer: 'orders',
      rows: 4,
      done: 3,
      failed: 1,
      expired: 0,
    });
    expect(s.inbox.totals).toEqual({ rows: 6, done: 5, failed: 1, inProgress: 0, expired: 1 });
    expect(s.outbox.destinations.map((d) => d.destination)).toEqual(['topic-a', 'topic-b']);
    expect(s.outbox.destinations[0]).toMatchObject({ pending: 2, sent: 1, failed: 1 });
    expect(s.outbox.destinations[0]?.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(120);
    expect(s.outbox.destinations[0]?.oldestPendingAgeSeconds).toBeLessThan(7200);
    expect(s.outbox.totals).toMatchObject({ pending: 3, sent: 2, failed: 1 });
    expect(s.outbox.totals.oldestPendingAgeSeconds).toBeGreaterThanOrEqual(7200);
  });

  it('text: a header, an inbox table and an outbox table', async () => {
    const r = await cli(['--schema', db.schema, 'status']);
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toBe(
      `schema ${db.schema}: version ${LATEST_SCHEMA_VERSION} (up to date; compatible from version ${FROM})`,
    );
    expect(r.stdout).toMatch(/consumer\s+rows\s+done\s+failed\s+in progress\s+expired\s+oldest row/);
    expect(r.stdout).toMatch(/orders\s+4\s+3\s+1\s+0\s+0\s+\d+(ms|s)/);
    expect(r.stdout).toMatch(/billing\s+2\s+2\s+0\s+0\s+1\s+1h/);
    expect(r.stdout).toMatch(/destination\s+pending\s+sent\s+failed\s+oldest pending/);
    expect(r.stdout).toMatch(/topic-b\s+1\s+1\s+0\s+2h /);
    expect(r.stdout).toMatch(/\(total\)\s+3\s+2\s+1\s+2h /);
  });

  it('an empty schema says so', async () => {
    const empty = await freshOnce('cli_status_empty');
    try {
      const r = await cli(['--schema', empty.schema, 'status']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('inbox: empty');
      expect(r.stdout).toContain('outbox: empty');
    } finally {
      await empty.close();
    }
  });
});
