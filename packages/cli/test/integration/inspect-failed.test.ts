import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Handler, PermanentError } from '@once/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quoteIdent } from '../../../../test/support/index.js';
import { cli, envelope, freshOnce } from './fixtures/cli.js';

// inspect and failed list|retry|discard against rows written by core itself, and the proof
// that matters: after `failed retry` a redelivery runs the handler afresh; after `failed
// discard` it is acked as a duplicate without running.

let db: Awaited<ReturnType<typeof freshOnce>>;
let dir: string;
const runs = new Map<string, number>();
const bodies = {
  o2: Buffer.from(JSON.stringify({ id: 'o2', amount: -1 })),
  o3: Buffer.from([0x00, 0xff, 0x10, 0x80, 0x01]),
};
const body = (id: string) => Buffer.from(JSON.stringify({ id, note: 'line1\nline2' }));
const poison: Handler = async () => {
  throw new PermanentError('bad amount');
};
const counting: Handler = async (e) => {
  runs.set(String(e.id), (runs.get(String(e.id)) ?? 0) + 1);
  return { total: 42 };
};
const at = (...args: string[]) => ['--schema', db.schema, ...args];

beforeAll(async () => {
  db = await freshOnce('cli_failed');
  dir = await mkdtemp(join(tmpdir(), 'once-cli-'));
  await db.process('orders', counting, [envelope('o1', body('o1'))]);
  await db.process('orders', poison, [envelope('o2', bodies.o2), envelope('o3', bodies.o3)]);
  await db.process(
    'orders',
    poison,
    ['o4', 'o5', 'o6', 'o7', 'o8'].map((id) => envelope(id, body(id))),
  );
  await db.process('shipping', poison, [envelope('s1', body('s1'))]);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await db.close();
});

describe('once inspect', () => {
  it('a processed row: status, fingerprint (sha256 of the body), stored result', async () => {
    const r = await cli(at('inspect', 'orders', 'o1'));
    expect(r.code).toBe(0);
    const sha = createHash('sha256').update(body('o1')).digest('hex');
    expect(r.stdout).toMatch(/status\s+done\n/);
    expect(r.stdout).toContain(`sha256:${sha}`);
    expect(r.stdout).toMatch(/result\s+\{"total":42\}/);
    expect(r.stdout).toMatch(/error\s+-/);
    const j = (await cli(at('--json', 'inspect', 'orders', 'o1'))).json();
    expect(j).toMatchObject({
      consumer: 'orders',
      messageId: 'o1',
      status: 'done',
      discarded: false,
      fingerprint: sha,
      attempts: 1,
      result: { total: 42 },
      error: null,
      body: null,
      steps: [],
    });
    expect(new Date(j.expiresAt as string).getTime()).toBeGreaterThan(
      new Date(j.createdAt as string).getTime(),
    );
  });

  it('a failed row: the error and a text preview of the body; JSON carries the whole body', async () => {
    const r = await cli(at('inspect', 'orders', 'o2'));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/status\s+failed/);
    expect(r.stdout).toContain('PermanentError: bad amount (PERMANENT)');
    // Where it came from, recorded with the failure, for `failed retry --republish`.
    expect(r.stdout).toMatch(/origin\s+\{.*"broker":"test"/);
    expect((await cli(at('--json', 'inspect', 'orders', 'o2'))).json().origin).toEqual({
      broker: 'test',
      queue: 'q',
      headers: {},
    });
    expect(r.stdout).toContain(`body         ${bodies.o2.length} B, utf8: {"id":"o2","amount":-1}`);
    expect(r.stdout).toContain('error stack:');
    const j = (await cli(at('--json', 'inspect', 'orders', 'o2'))).json<{ body: { base64: string } }>();
    expect(Buffer.from(j.body.base64, 'base64').equals(bodies.o2)).toBe(true);
    expect(j).toMatchObject({ error: { name: 'PermanentError', code: 'PERMANENT', message: 'bad amount' } });
  });

  it('a binary body is previewed as hex; --body-bytes cuts the preview', async () => {
    expect((await cli(at('inspect', 'orders', 'o3'))).stdout).toContain('hex: 00ff108001');
    expect((await cli(at('inspect', 'orders', 'o3', '--body-bytes', '2'))).stdout).toContain('hex: 00ff…');
    expect((await cli(at('inspect', 'orders', 'o4'))).stdout).toContain('"note":"line1\\nline2"');
  });

  it('an unknown consumer, then an unknown id of a known consumer: exit 5 naming which', async () => {
    const c = await cli(at('inspect', 'ordres', 'o1'));
    expect(c.code).toBe(5);
    expect(c.stderr).toContain('unknown consumer "ordres"');
    const i = await cli(at('--json', 'inspect', 'orders', 'nope'));
    expect(i.code).toBe(5);
    expect(i.errorJson().error).toMatchObject({ code: 'UNKNOWN_MESSAGE', exitCode: 5 });
    expect(i.errorJson().error.message).toContain('no message "nope" for consumer "orders"');
  });
});

describe('once failed list', () => {
  it('every failure, oldest first per consumer, with its error', async () => {
    const r = await cli(at('failed', 'list'));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/consumer\s+message id\s+attempts\s+failed at\s+body\s+error/);
    expect(r.stdout).toMatch(
      new RegExp(
        `orders\\s+o2\\s+1\\s+\\S+\\s+${bodies.o2.length} B\\s+PermanentError: bad amount \\(PERMANENT\\)`,
      ),
    );
    expect(r.stdout).toMatch(/shipping\s+s1/);
    expect(r.stdout).not.toMatch(/\so1\s/);
    const j = (await cli(at('--json', 'failed', 'list'))).json<{
      total: number;
      failed: { messageId: string }[];
    }>();
    expect(j.failed.map((f) => f.messageId)).toEqual(['o2', 'o3', 'o4', 'o5', 'o6', 'o7', 'o8', 's1']);
    expect(j.total).toBe(8);
  });

  it('--consumer and --limit', async () => {
    const only = (await cli(at('--json', 'failed', 'list', '--consumer', 'shipping'))).json<{
      failed: { consumer: string }[];
    }>();
    expect(only.failed.map((f) => f.consumer)).toEqual(['shipping']);
    const some = await cli(at('failed', 'list', '--limit', '2'));
    expect(some.stdout).toContain('showing 2 of 8 failed; raise --limit to see more');
  });

  it('an unknown consumer is exit 5', async () => {
    const r = await cli(at('failed', 'list', '--consumer', 'nobody'));
    expect(r.code).toBe(5);
    expect(r.stderr).toContain('unknown consumer "nobody"');
  });
});

describe('once failed retry', () => {
  it('saves the body to --out, deletes the record; the next delivery runs the handler afresh', async () => {
    // Before: a redelivery of a recorded failure is failed again, and the handler does not run.
    const before = await db.process('orders', counting, [envelope('o2', bodies.o2)]);
    expect(before[0]?.status).toBe('failed');
    expect(runs.get('o2')).toBeUndefined();

    const out = join(dir, 'o2.body');
    const r = await cli(at('failed', 'retry', 'orders', 'o2', '--out', out));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`deleted the failed record of "o2"`);
    expect(r.stdout).toContain(`written to ${out}`);
    expect((await readFile(out)).equals(bodies.o2)).toBe(true);

    const after = await db.process('orders', counting, [envelope('o2', await readFile(out))]);
    expect(after[0]?.status).toBe('processed');
    expect(runs.get('o2')).toBe(1);
    expect((await cli(at('--json', 'inspect', 'orders', 'o2'))).json()).toMatchObject({ status: 'done' });
  });

  it('without --out the raw body goes to stdout and the message to stderr', async () => {
    const r = await cli(at('failed', 'retry', 'orders', 'o3'));
    expect(r.code).toBe(0);
    expect(r.stdoutBytes.equals(bodies.o3)).toBe(true);
    expect(r.stderr).toContain('written to stdout');
  });

  it('no --out, stdout a terminal: the body ends with a newline before the status line', async () => {
    await db.process('orders', poison, [envelope('o10', body('o10'))]);
    const r = await cli(at('failed', 'retry', 'orders', 'o10'), { stdoutTty: true });
    expect(r.code).toBe(0);
    expect(r.stdoutBytes.equals(Buffer.concat([body('o10'), Buffer.from('\n')]))).toBe(true);
    expect(r.stderr).toMatch(/^deleted the failed record of "o10"/);
  });

  it('--json: the body as base64 in the result', async () => {
    const r = await cli(at('--json', 'failed', 'retry', 'orders', 'o5'));
    expect(r.code).toBe(0);
    const j = r.json<{ deleted: boolean; republished: boolean; body: { base64: string; bytes: number } }>();
    expect(j).toMatchObject({ consumer: 'orders', messageId: 'o5', deleted: true, republished: false });
    expect(Buffer.from(j.body.base64, 'base64').equals(body('o5'))).toBe(true);
  });

  it('--republish without a destination it can infer is refused, and nothing changes', async () => {
    const r = await cli(at('failed', 'retry', 'orders', 'o6', '--republish'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'it came from test "q", which has no default destination: pass --to <destination>',
    );
    expect(r.stderr).toContain('Nothing was changed');
    expect((await cli(at('--json', 'inspect', 'orders', 'o6'))).json()).toMatchObject({ status: 'failed' });
  });

  it('--republish --to: the body goes into the outbox under its own id in the same transaction', async () => {
    const r = await cli(
      at('failed', 'retry', 'orders', 'o7', '--republish', '--to', 'orders-topic', '--key', 'k7'),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(
      'Republished through the outbox to "orders-topic" with key "k7" under its own message id',
    );
    expect(r.stdoutBytes.includes(body('o7'))).toBe(false);
    const rows = await db.pool.query(
      `SELECT destination, key, body, message_id, status FROM ${quoteIdent(db.schema)}.outbox WHERE message_id = 'o7'`,
    );
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0]).toMatchObject({
      destination: 'orders-topic',
      key: 'k7',
      message_id: 'o7',
      status: 'pending',
    });
    expect((rows.rows[0].body as Buffer).equals(body('o7'))).toBe(true);
    expect((await cli(at('--json', 'inspect', 'orders', 'o7'))).code).toBe(5);
  });

  it('a body that cannot be written leaves the record in place (exit 1)', async () => {
    const r = await cli(at('failed', 'retry', 'orders', 'o6', '--out', join(dir, 'no', 'such', 'dir', 'x')));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('ENOENT');
    expect((await cli(at('--json', 'inspect', 'orders', 'o6'))).json()).toMatchObject({ status: 'failed' });
  });

  it('a processed row, an unknown id, an unknown consumer: exit 5', async () => {
    const done = await cli(at('failed', 'retry', 'orders', 'o1', '--out', join(dir, 'x')));
    expect(done.code).toBe(5);
    expect(done.stderr).toContain('is done, not failed');
    expect((await cli(at('failed', 'retry', 'orders', 'zz', '--out', join(dir, 'x')))).stderr).toContain(
      'no message "zz"',
    );
    expect((await cli(at('failed', 'retry', 'nobody', 'o1', '--out', join(dir, 'x')))).code).toBe(5);
  });

  it('lease mode: a failure with recorded steps is kept unless --forget-steps', async () => {
    const q = quoteIdent(db.schema);
    await db.pool.query(
      `INSERT INTO ${q}.steps (consumer, message_id, step, seq, attempt, result) VALUES ('orders', 'o8', 'charge', 1, 1, '{"charged":10}')`,
    );
    const shown = await cli(at('inspect', 'orders', 'o8'));
    expect(shown.stdout).toContain('recorded steps:');
    expect(shown.stdout).toMatch(/1\s+charge\s+1\s+\S+\s+\{"charged":10\}/);

    const refused = await cli(at('failed', 'retry', 'orders', 'o8', '--out', join(dir, 'o8')));
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('has 1 recorded step (charge)');
    expect((await cli(at('--json', 'inspect', 'orders', 'o8'))).json()).toMatchObject({ status: 'failed' });

    const forced = await cli(
      at('failed', 'retry', 'orders', 'o8', '--out', join(dir, 'o8'), '--forget-steps'),
    );
    expect(forced.code).toBe(0);
    const left = await db.pool.query(`SELECT count(*)::int AS n FROM ${q}.steps WHERE message_id = 'o8'`);
    expect(left.rows[0].n).toBe(0);
  });
});

describe('once failed discard', () => {
  it('the record becomes done (error kept): the next delivery is a duplicate and does not run', async () => {
    const r = await cli(at('failed', 'discard', 'orders', 'o4'));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('discarded the failure of "o4"');
    const shown = await cli(at('inspect', 'orders', 'o4'));
    expect(shown.stdout).toContain('done (a failure discarded by `once failed discard`)');
    expect(shown.stdout).toContain('PermanentError: bad amount');
    const again = await db.process('orders', counting, [envelope('o4', body('o4'))]);
    expect(again[0]?.status).toBe('duplicate');
    expect(runs.get('o4')).toBeUndefined();
    const list = (await cli(at('--json', 'failed', 'list'))).json<{ failed: { messageId: string }[] }>();
    expect(list.failed.map((f) => f.messageId)).not.toContain('o4');
  });

  it('twice, or an unknown id or consumer: exit 5', async () => {
    const twice = await cli(at('failed', 'discard', 'orders', 'o4'));
    expect(twice.code).toBe(5);
    expect(twice.stderr).toContain('is done, not failed');
    expect((await cli(at('failed', 'discard', 'orders', 'missing'))).code).toBe(5);
    const c = await cli(at('--json', 'failed', 'discard', 'nobody', 'o4'));
    expect(c.code).toBe(5);
    expect(c.errorJson().error.code).toBe('UNKNOWN_CONSUMER');
  });
});
