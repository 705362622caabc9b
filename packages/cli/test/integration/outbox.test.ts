import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { quoteIdent, serviceEnv } from '../../../../test/support/index.js';
import { cli, freshOnce } from './fixtures/cli.js';

let db: Awaited<ReturnType<typeof freshOnce>>;
let listener: pg.Client;
const notifications: string[] = [];
const at = (...args: string[]) => ['--schema', db.schema, ...args];
const outbox = () => `${quoteIdent(db.schema)}.outbox`;

interface Row {
  id: string;
  status: string;
  attempts: number;
  due: boolean;
  last_error: unknown;
}

async function row(id: string): Promise<Row | undefined> {
  const r = await db.pool.query<Row>(
    `SELECT id::text, status, attempts, available_at <= now() AS due, last_error FROM ${outbox()} WHERE id = $1`,
    [id],
  );
  return r.rows[0];
}

/** Inserts a row as a relay would have left it; returns its id. */
async function insert(destination: string, status: string, attempts = 0): Promise<string> {
  const r = await db.pool.query<{ id: string }>(
    `INSERT INTO ${outbox()} (destination, body, status, attempts, available_at, last_error)
     VALUES ($1, 'x', $2, $3, now() + interval '1 hour', $4::jsonb) RETURNING id::text`,
    [
      destination,
      status,
      attempts,
      status === 'failed' ? JSON.stringify({ message: 'broker said no' }) : null,
    ],
  );
  return r.rows[0]?.id ?? '';
}

beforeAll(async () => {
  db = await freshOnce('cli_outbox');
  listener = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
  listener.on('error', () => {});
  await listener.connect();
  listener.on('notification', (n) => notifications.push(n.channel));
  // The relays' channel (core's outboxChannel): retry wakes them instead of waiting for a poll.
  await listener.query(`LISTEN ${quoteIdent(`once_outbox_${db.schema}`)}`);
});
afterAll(async () => {
  await listener.end();
  await db.close();
});
beforeEach(async () => {
  await db.pool.query(`DELETE FROM ${outbox()}`);
  notifications.length = 0;
});

describe('once outbox status', () => {
  it('per destination and in total', async () => {
    await insert('orders', 'pending');
    await insert('orders', 'sent');
    await insert('orders', 'failed', 10);
    await insert('mail', 'failed', 10);
    const r = await cli(at('outbox', 'status'));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/mail\s+0\s+0\s+1\s+-/);
    expect(r.stdout).toMatch(/orders\s+1\s+1\s+1\s+\d+(ms|s) \(/);
    expect(r.stdout).toMatch(/\(total\)\s+1\s+1\s+2/);
    const j = (await cli(at('--json', 'outbox', 'status'))).json<{ totals: Record<string, unknown> }>();
    expect(j.totals).toMatchObject({ pending: 1, sent: 1, failed: 2 });
  });

  it('empty', async () => {
    expect((await cli(at('outbox', 'status'))).stdout.trim()).toBe('outbox: empty');
  });
});

describe('once outbox retry', () => {
  it('--id: that failed row back to pending, attempts 0, due now; others untouched; relays woken', async () => {
    const a = await insert('orders', 'failed', 10);
    const b = await insert('orders', 'failed', 10);
    const r = await cli(at('outbox', 'retry', '--id', a));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('1 outbox message back to pending');
    expect(await row(a)).toMatchObject({ status: 'pending', attempts: 0, due: true });
    expect(await row(b)).toMatchObject({ status: 'failed', attempts: 10, due: false });
    await expect.poll(() => notifications.length).toBeGreaterThan(0);
  });

  it('--all-failed: every failed row, never a sent or pending one', async () => {
    const failed = [await insert('orders', 'failed', 3), await insert('mail', 'failed', 3)];
    const sent = await insert('orders', 'sent', 1);
    const pending = await insert('orders', 'pending', 2);
    const r = await cli(at('--json', 'outbox', 'retry', '--all-failed'));
    expect(r.code).toBe(0);
    expect(r.json()).toEqual({ schema: db.schema, retried: 2 });
    for (const id of failed)
      expect(await row(id)).toMatchObject({ status: 'pending', attempts: 0, due: true });
    expect(await row(sent)).toMatchObject({ status: 'sent', attempts: 1 });
    expect(await row(pending)).toMatchObject({ status: 'pending', attempts: 2, due: false });
    const none = await cli(at('outbox', 'retry', '--all-failed'));
    expect(none.stdout.trim()).toBe('no failed outbox messages to retry');
  });

  it('an unknown id, or a row that is not failed: exit 5', async () => {
    const unknown = await cli(at('outbox', 'retry', '--id', '7e0a5c2e-0000-4000-8000-000000000000'));
    expect(unknown.code).toBe(5);
    expect(unknown.stderr).toContain('no outbox message 7e0a5c2e-0000-4000-8000-000000000000');
    const sent = await insert('orders', 'sent', 1);
    const r = await cli(at('--json', 'outbox', 'retry', '--id', sent));
    expect(r.code).toBe(5);
    expect(r.errorJson().error).toMatchObject({ code: 'NOT_FAILED', exitCode: 5 });
    expect(await row(sent)).toMatchObject({ status: 'sent' });
  });
});
