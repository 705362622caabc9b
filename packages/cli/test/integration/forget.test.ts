import { type Handler, PermanentError } from '@once/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { quoteIdent } from '../../../../test/support/index.js';
import { cli, envelope, freshOnce, terminalInput } from './fixtures/cli.js';

// once forget: processed ids deleted on purpose so the next delivery runs the handler again.
// The proof that matters is that redelivery; the confirmation rules keep it from happening by
// accident. The races with running consumers are core's tests (admin-forget.test.ts).

let db: Awaited<ReturnType<typeof freshOnce>>;
const runs = new Map<string, number>();
const counting: Handler = async (e) => {
  runs.set(String(e.id), (runs.get(String(e.id)) ?? 0) + 1);
};
const poison: Handler = async () => {
  throw new PermanentError('bad amount');
};
const at = (...args: string[]) => ['--schema', db.schema, ...args];

async function status(id: string): Promise<string | undefined> {
  const r = await db.pool.query<{ status: string }>(
    `SELECT status FROM ${quoteIdent(db.schema)}.inbox WHERE consumer = 'orders' AND message_id = $1`,
    [id],
  );
  return r.rows[0]?.status;
}

/** Moves a row's claim time `minutes` into the past. */
async function age(id: string, minutes: number): Promise<void> {
  await db.pool.query(
    `UPDATE ${quoteIdent(db.schema)}.inbox SET created_at = now() - $2 * interval '1 minute' WHERE consumer = 'orders' AND message_id = $1`,
    [id, minutes],
  );
}

beforeAll(async () => {
  db = await freshOnce('cli_forget');
});
afterAll(async () => {
  await db.close();
});
beforeEach(async () => {
  runs.clear();
  await db.pool.query(`TRUNCATE ${quoteIdent(db.schema)}.inbox, ${quoteIdent(db.schema)}.steps`);
  await db.process(
    'orders',
    counting,
    ['a', 'b', 'c'].map((id) => envelope(id)),
  );
  await db.process('orders', poison, [envelope('bad')]);
  runs.clear();
});

describe('once forget <consumer> <id>', () => {
  it('--yes: deletes the done row; the next delivery runs the handler again', async () => {
    const r = await cli(at('forget', 'orders', 'a', '--yes'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('forgot "a" (consumer "orders"): its next delivery is processed afresh');
    expect(await status('a')).toBeUndefined();
    const again = await db.process('orders', counting, [envelope('a'), envelope('b')]);
    expect(again.map((o) => o.status)).toEqual(['processed', 'duplicate']);
    expect(runs.get('a')).toBe(1);
  });

  it('--json reports what it removed', async () => {
    const r = await cli(at('--json', 'forget', 'orders', 'b', '-y'));
    expect(r.code).toBe(0);
    expect(r.json()).toEqual({ schema: db.schema, consumer: 'orders', messageId: 'b', removed: 1, steps: 0 });
  });

  it('without a terminal and without --yes it refuses, changing nothing', async () => {
    const r = await cli(at('forget', 'orders', 'a'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('pass --yes');
    const j = await cli(at('--json', 'forget', 'orders', '--since', '1d'));
    expect(j.code).toBe(2);
    expect(j.errorJson().error).toMatchObject({ code: 'CONFIRMATION_REQUIRED', exitCode: 2 });
    expect(await status('a')).toBe('done');
  });

  it('on a terminal it asks: yes forgets, anything else keeps the row (exit 1)', async () => {
    const yes = await cli(at('forget', 'orders', 'a'), { stdin: terminalInput('y') });
    expect(yes.code, yes.stderr).toBe(0);
    expect(yes.stderr).toMatch(/^Forget message "a" of consumer "orders" \(processed .+\)\? .* \[y\/N\] $/);
    expect(await status('a')).toBeUndefined();

    const no = await cli(at('forget', 'orders', 'b'), { stdin: terminalInput('n') });
    expect(no.code).toBe(1);
    expect(no.stderr).toContain('not confirmed: nothing was forgotten');
    expect(await status('b')).toBe('done');
  });

  it('Ctrl-C at the prompt: exit 130, nothing forgotten', async () => {
    const stop = new AbortController();
    const r = await cli(at('forget', 'orders', 'c'), {
      stdin: terminalInput(),
      signal: stop.signal,
      onStderr: (chunk) => {
        if (chunk.includes('[y/N]')) setTimeout(() => stop.abort('SIGINT'), 10);
      },
    });
    expect(r.code).toBe(130);
    expect(await status('c')).toBe('done');
  });

  it('a failed row, an unknown id or consumer: exit 5 without asking', async () => {
    const failed = await cli(at('forget', 'orders', 'bad'), { stdin: terminalInput('y') });
    expect(failed.code).toBe(5);
    expect(failed.stderr).toContain('is failed, not done: nothing to forget (`once failed retry`');
    expect(failed.stderr).not.toContain('[y/N]');
    expect(await status('bad')).toBe('failed');
    const unknown = await cli(at('--json', 'forget', 'orders', 'zz', '--yes'));
    expect(unknown.errorJson().error).toMatchObject({ code: 'UNKNOWN_MESSAGE', exitCode: 5 });
    expect((await cli(at('forget', 'nobody', 'a', '--yes'))).code).toBe(5);
  });

  it('lease mode: an id with recorded steps needs --forget-steps', async () => {
    await db.pool.query(
      `INSERT INTO ${quoteIdent(db.schema)}.steps (consumer, message_id, step, seq, attempt) VALUES ('orders', 'c', 'charge', 1, 1)`,
    );
    const refused = await cli(at('forget', 'orders', 'c', '--yes'));
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('has 1 recorded step (charge)');
    expect(await status('c')).toBe('done');
    const forced = await cli(at('forget', 'orders', 'c', '--yes', '--forget-steps'));
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain('and its 1 recorded step');
  });
});

describe('once forget <consumer> --since <time>', () => {
  it('forgets the done ids processed in the range, keeps failed ones and says so', async () => {
    await age('a', 180);
    await age('b', 30);
    await age('c', 10);
    await age('bad', 20);
    const r = await cli(at('--json', 'forget', 'orders', '--since', '1h', '--yes', '--batch-size', '1'));
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toMatchObject({
      consumer: 'orders',
      removed: 2,
      steps: 0,
      kept: { failed: 1, inProgress: 0, withSteps: 0 },
      stopped: false,
    });
    expect(await status('a')).toBe('done');
    expect(await status('b')).toBeUndefined();
    expect(await status('bad')).toBe('failed');

    const text = await cli(
      at('forget', 'orders', '--since', new Date(Date.now() - 4 * 3600_000).toISOString(), '-y'),
    );
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(
      /^forgot 1 processed id of consumer "orders" processed from .+: their next deliveries are processed afresh\. Kept: 1 failed \(see `once failed list`\)\n$/,
    );
  });

  it('--until bounds it; nothing in range is exit 0 without asking', async () => {
    await age('a', 50);
    await age('b', 40);
    await age('c', 5);
    const r = await cli(at('--json', 'forget', 'orders', '--since', '1h', '--until', '30m', '--yes'));
    expect(r.json()).toMatchObject({ removed: 2 });
    expect(await status('c')).toBe('done');
    const none = await cli(at('forget', 'orders', '--since', '1h', '--until', '30m'));
    expect(none.code).toBe(0);
    expect(none.stdout).toMatch(/^forgot 0 processed ids/);
  });

  it("run twice, after the range took the consumer's last rows: the second run is exit 0, forgot 0", async () => {
    // Only done rows left for 'orders', so the first run leaves the consumer without any row.
    await db.pool.query(`DELETE FROM ${quoteIdent(db.schema)}.inbox WHERE message_id = 'bad'`);
    const first = await cli(at('forget', 'orders', '--since', '1h', '--yes'));
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^forgot 3 processed ids of consumer "orders"/);
    const second = await cli(at('forget', 'orders', '--since', '1h', '--yes'));
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toBe('');
    expect(second.stdout).toMatch(
      /^forgot 0 processed ids of consumer "orders" processed from .+\. It has no rows in schema \S+ \(see `once status` for the consumers there are\)\n$/,
    );
    const json = await cli(at('--json', 'forget', 'orders', '--since', '1h', '--yes'));
    expect(json.code, json.stderr).toBe(0);
    expect(json.json()).toMatchObject({
      consumer: 'orders',
      removed: 0,
      steps: 0,
      kept: { failed: 0, inProgress: 0, withSteps: 0 },
      stopped: false,
    });
    // A consumer that never had rows reads the same: nothing to forget is not a failure.
    const never = await cli(at('forget', 'nobody', '--since', '1h', '--yes'));
    expect(never.code, never.stderr).toBe(0);
    expect(never.stdout).toMatch(/^forgot 0 processed ids of consumer "nobody"/);
  });

  it.each([
    [['forget', 'orders'], 'pass exactly one of <id> and --since <time>'],
    [['forget', 'orders', 'a', '--since', '1h'], 'pass exactly one of <id> and --since <time>'],
    [['forget', 'orders', 'a', '--until', '1h'], '--until only applies with --since'],
    [['forget', 'orders', '--since', '1h', '--until', '2h'], '--until must be later than --since'],
    [['forget', 'orders', '--since', 'yesterday'], 'must be an ISO 8601 time'],
  ])('usage: %j', async (argv, message) => {
    const r = await cli(at(...argv, '--yes'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
  });
});
