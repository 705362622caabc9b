import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Envelope, type Handler, PermanentError } from '@once/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quoteIdent } from '../../../../test/support/index.js';
import { type CliResult, cli, envelope, freshOnce, terminalInput } from './fixtures/cli.js';

// A producer chooses message ids, bodies and (through a handler that echoes its input) error
// messages; a handler's author chooses consumer, step and destination names. None of it may reach
// an operator's terminal as a control character: a raw ESC or C1 CSI erases, moves or rewrites
// what is on screen, and a raw newline forges a row. Every command that prints data from the
// database runs here against rows full of such text, in text and in --json.

const ESC = '\u001b';
/** What each one would do on a terminal if printed raw. */
const ATTACKS: Readonly<Record<string, string>> = {
  eraseLine: `${ESC}[2K\r`,
  cursorUp: `${ESC}[1A${ESC}[2K`,
  c1Csi: '\u009b2J',
  title: `${ESC}]0;pwned\u0007`,
  hyperlink: `${ESC}]8;;https://x.invalid/${ESC}\\click${ESC}]8;;${ESC}\\`,
  backspace: 'abc\b\b\bxyz',
  del: 'a\u007fb',
  nextLine: 'a\u0085b',
  forgedRow: 'x\norders  m-forged  1  2026-01-01T00:00:00.000Z  -  PermanentError: fine',
  tab: 'a\tb',
};
const ids = Object.fromEntries(Object.entries(ATTACKS).map(([k, v]) => [k, `m-${k}-${v}`]));
const EVIL_CONSUMER = `shipping${ESC}[2K\u009b1A`;
const EVIL_STEP = `charge${ESC}[8m`;
const EVIL_DESTINATION = `orders${ESC}[2K\r\u009b1Ainvoices`;
const EVIL_OWNER = `worker-1${ESC}]0;x\u0007`;

/** Any control character a terminal acts on: C0 but the newline that ends a line, DEL, C1. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

/** How a text cell must show `s`: JSON's escapes for C0, DEL and C1, nothing else changed (a reference of the test's own). */
function shown(s: string): string {
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    const named: Record<number, string> = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r' };
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) out += named[c] ?? `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return out;
}

/**
 * How a name cell (id, consumer, step, destination, owner) must show `s`: as {@link shown}, but a
 * name whose shown edges a terminal would not show (empty, a blank first or last, as `trim` sees
 * blanks) or that starts with a quote is a JSON string literal.
 */
function shownName(s: string): string {
  const chars = [...shown(s)];
  const blank = (ch: string | undefined) => ch !== undefined && ch.trim() === '';
  const edgy = chars.length === 0 || blank(chars[0]) || blank(chars.at(-1)) || chars[0] === '"';
  return edgy ? shown(JSON.stringify(s)) : shown(s);
}

function expectSafe(r: CliResult, label: string): void {
  for (const [name, text] of [
    ['stdout', r.stdout],
    ['stderr', r.stderr],
  ] as const) {
    const m = RAW_CONTROL.exec(text);
    expect(
      m,
      `${label}: raw U+${m?.[0].codePointAt(0)?.toString(16).padStart(4, '0')} on ${name}: ${JSON.stringify(text)}`,
    ).toBeNull();
  }
}

let db: Awaited<ReturnType<typeof freshOnce>>;
let dir: string;
const at = (...args: string[]) => ['--schema', db.schema, ...args];
const q = () => quoteIdent(db.schema);
const failing =
  (message: string): Handler =>
  async () => {
    throw new PermanentError(message);
  };
const withOrigin = (e: Envelope): Envelope => ({
  ...e,
  source: { broker: `kafka${ESC}[2K`, queue: `q\u009b2J`, offset: '1' },
});

beforeAll(async () => {
  db = await freshOnce('cli_hostile');
  dir = await mkdtemp(join(tmpdir(), 'once-cli-hostile-'));
  for (const [k, id] of Object.entries(ids)) {
    const attack = ATTACKS[k] ?? '';
    await db.process('orders', failing(`bad ${attack}`), [envelope(id, Buffer.from(`{"note":"${attack}"}`))]);
  }
  const done: Handler = async (e) => ({ echoed: e.id });
  await db.process('orders', done, [envelope(`d-${ATTACKS.c1Csi}`), envelope(`d2-${ATTACKS.eraseLine}`)]);
  await db.process(EVIL_CONSUMER, failing(`no ${ATTACKS.cursorUp}`), [
    withOrigin(envelope(`s-${ATTACKS.c1Csi}`)),
    envelope(`s2-${ATTACKS.del}`),
  ]);
  await db.process(EVIL_CONSUMER, done, [envelope(`sd-${ATTACKS.title}`)]);
  await db.pool.query(
    `INSERT INTO ${q()}.steps (consumer, message_id, step, seq, attempt, result) VALUES ($1, $2, $3, 1, 1, $4::jsonb)`,
    ['orders', ids.hyperlink, EVIL_STEP, JSON.stringify({ note: ATTACKS.nextLine })],
  );
  await db.process('leases', done, [envelope('l-1')]);
  await db.pool.query(
    `UPDATE ${q()}.inbox SET status = 'in_progress', owner = $1, lease_until = now() + interval '1 hour' WHERE consumer = 'leases'`,
    [EVIL_OWNER],
  );
  await db.pool.query(
    `INSERT INTO ${q()}.outbox (destination, body, status, attempts, last_error)
     VALUES ($1, 'x', 'pending', 0, NULL), ($1, 'y', 'failed', 3, $2::jsonb)`,
    [EVIL_DESTINATION, JSON.stringify({ message: `broker said ${ATTACKS.eraseLine}` })],
  );
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await db.close();
});

describe('every command that prints stored text escapes C0, DEL and C1', () => {
  it('failed list: one line per row, each id and error escaped; --json keeps them exact', async () => {
    const r = await cli(at('failed', 'list'));
    expect(r.code).toBe(0);
    expectSafe(r, 'failed list');
    const lines = r.stdout.trimEnd().split('\n');
    // The header and one line per failure: no forged row.
    expect(lines).toHaveLength(1 + Object.keys(ids).length + 2);
    for (const [k, id] of Object.entries(ids)) {
      expect(r.stdout).toContain(shown(id));
      expect(r.stdout).toContain(`PermanentError: ${shown(`bad ${ATTACKS[k]}`)} (PERMANENT)`);
    }
    expect(r.stdout).toContain(shown(EVIL_CONSUMER));
    expect(lines.filter((l) => l.startsWith('orders  m-forged'))).toEqual([]);

    const j = await cli(at('--json', 'failed', 'list'));
    expectSafe(j, 'failed list --json');
    const rows = j.json<{ failed: { consumer: string; messageId: string; error: { message: string } }[] }>()
      .failed;
    expect(new Set(rows.map((x) => x.messageId))).toEqual(
      new Set([...Object.values(ids), `s-${ATTACKS.c1Csi}`, `s2-${ATTACKS.del}`]),
    );
    expect(rows.find((x) => x.messageId === ids.c1Csi)?.error.message).toBe(`bad ${ATTACKS.c1Csi}`);
  });

  it('failed list --consumer with a hostile name', async () => {
    const r = await cli(at('failed', 'list', '--consumer', EVIL_CONSUMER));
    expect(r.code).toBe(0);
    expectSafe(r, 'failed list --consumer');
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(3);
  });

  it('inspect: id, error, stack, body preview, result, origin, steps, lease owner', async () => {
    for (const [label, consumer, id] of [
      ...Object.values(ids).map((id) => ['failed', 'orders', id]),
      ['done', 'orders', `d-${ATTACKS.c1Csi}`],
      ['origin', EVIL_CONSUMER, `s-${ATTACKS.c1Csi}`],
      ['lease', 'leases', 'l-1'],
    ] as [string, string, string][]) {
      const r = await cli(at('inspect', consumer, id));
      expect(r.code, `${label} ${JSON.stringify(id)}: ${r.stderr}`).toBe(0);
      expectSafe(r, `inspect ${label} ${JSON.stringify(id)}`);
      expect(r.stdout).toContain(`message id   ${shown(id)}\n`);
      const j = await cli(at('--json', 'inspect', consumer, id));
      expectSafe(j, `inspect --json ${JSON.stringify(id)}`);
      expect(j.json()).toMatchObject({ consumer, messageId: id });
    }
    const withSteps = await cli(at('inspect', 'orders', ids.hyperlink ?? ''));
    expect(withSteps.stdout).toContain(shown(EVIL_STEP));
    const lease = await cli(at('inspect', 'leases', 'l-1'));
    expect(lease.stdout).toContain(`lease owner  ${shown(EVIL_OWNER)}\n`);
    const origin = await cli(at('--json', 'inspect', EVIL_CONSUMER, `s-${ATTACKS.c1Csi}`));
    expect(origin.json()).toMatchObject({ origin: { broker: `kafka${ESC}[2K`, queue: 'q\u009b2J' } });
  });

  it('a body with C1 controls in valid UTF-8 is previewed as hex, not as text', async () => {
    const r = await cli(at('--json', 'inspect', 'orders', ids.nextLine ?? ''));
    expect(r.json<{ body: { encoding: string } }>().body.encoding).toBe('hex');
  });

  it('status and outbox status: consumer and destination names', async () => {
    for (const argv of [['status'], ['outbox', 'status']]) {
      const r = await cli(at(...argv));
      expect(r.code).toBe(0);
      expectSafe(r, argv.join(' '));
      expect(r.stdout).toContain(shown(EVIL_DESTINATION));
      const j = await cli(at('--json', ...argv));
      expectSafe(j, `${argv.join(' ')} --json`);
      expect(j.stdout).toContain(JSON.stringify(EVIL_DESTINATION).slice(1, 9));
    }
    const s = await cli(at('--json', 'status'));
    expect(
      s.json<{ inbox: { consumers: { consumer: string }[] } }>().inbox.consumers.map((c) => c.consumer),
    ).toContain(EVIL_CONSUMER);
  });

  it('refusals that quote an id, a consumer, a step, an origin or an outbox id', async () => {
    const cases: [string, string[], number][] = [
      ['unknown id', ['inspect', 'orders', `nope-${ATTACKS.c1Csi}`], 5],
      ['unknown consumer', ['failed', 'list', '--consumer', `x${ATTACKS.del}`], 5],
      ['not failed', ['failed', 'retry', 'orders', `d-${ATTACKS.c1Csi}`], 5],
      ['has steps', ['failed', 'retry', 'orders', ids.hyperlink ?? ''], 2],
      ['no destination', ['failed', 'retry', EVIL_CONSUMER, `s-${ATTACKS.c1Csi}`, '--republish'], 2],
      ['not done', ['forget', 'orders', ids.c1Csi ?? '', '--yes'], 5],
      ['unknown outbox id', ['outbox', 'retry', '--id', `o${ATTACKS.nextLine}`], 5],
      ['unknown option', ['status', `--bo${ESC}[2Kgus`], 2],
      ['bad value', ['purge', '--batch-size', `1${ATTACKS.c1Csi}`], 2],
    ];
    for (const [label, argv, code] of cases) {
      for (const json of [false, true]) {
        const r = await cli(at(...(json ? ['--json'] : []), ...argv));
        expect(r.code, `${label}: ${r.stderr}`).toBe(code);
        expectSafe(r, `${label}${json ? ' --json' : ''}`);
        // One line, whatever the id holds.
        expect(r.stderr.trimEnd().split('\n'), label).toHaveLength(1);
      }
    }
  });

  it('a schema whose newer migration names what it removed in hostile text', async () => {
    const other = await freshOnce('cli_hostile_new');
    try {
      await other.pool.query(
        `INSERT INTO ${quoteIdent(other.schema)}.schema_version (version, name, compatible_from, removes)
         VALUES (900, $1, 900, $2)`,
        [`drop${ESC}[2K`, `inbox.body\u009b1A`],
      );
      for (const json of [false, true]) {
        const r = await cli(['--schema', other.schema, ...(json ? ['--json'] : []), 'status']);
        expect(r.code).toBe(4);
        expectSafe(r, 'too new');
      }
    } finally {
      await other.close();
    }
  });

  it('forget: the question and the answer name the id escaped', async () => {
    const asked = await cli(at('forget', 'orders', `d2-${ATTACKS.eraseLine}`), { stdin: terminalInput('n') });
    expect(asked.code).toBe(1);
    expectSafe(asked, 'forget question');
    expect(asked.stderr).toContain(JSON.stringify(`d2-${ATTACKS.eraseLine}`));
    const done = await cli(at('forget', EVIL_CONSUMER, `sd-${ATTACKS.title}`, '--yes'));
    expect(done.code).toBe(0);
    expectSafe(done, 'forget one');
    const range = await cli(at('forget', EVIL_CONSUMER, '--since', '1d', '--yes'));
    expect(range.code).toBe(0);
    expectSafe(range, 'forget --since');
  });

  it('failed retry and discard: the status lines; on a terminal the body itself', async () => {
    const out = join(dir, 'body');
    const saved = await cli(at('failed', 'retry', 'orders', ids.eraseLine ?? '', '--out', out));
    expect(saved.code).toBe(0);
    expectSafe(saved, 'failed retry --out');
    const discarded = await cli(at('failed', 'discard', 'orders', ids.cursorUp ?? ''));
    expect(discarded.code).toBe(0);
    expectSafe(discarded, 'failed discard');
    // A terminal shows the body, it does not store it: its controls are escaped there.
    const tty = await cli(at('failed', 'retry', 'orders', ids.title ?? ''), { stdoutTty: true });
    expect(tty.code).toBe(0);
    expectSafe(tty, 'failed retry on a terminal');
    expect(tty.stdout).toBe(`${shown(`{"note":"${ATTACKS.title}"}`)}\n`);
    // Redirected, stdout stays the exact stored bytes.
    const raw = await cli(at('failed', 'retry', 'orders', ids.c1Csi ?? ''));
    expect(raw.code).toBe(0);
    expect(raw.stdout).toBe(`{"note":"${ATTACKS.c1Csi}"}`);
    expect(RAW_CONTROL.test(raw.stderr)).toBe(false);
  });
});

describe('names a terminal would blur', () => {
  it('ids that differ only by blanks at their edges or a quote stay told apart, in list and inspect', async () => {
    const names = ['e-1', 'e-1 ', ' e-1', 'e-1\u00a0', '"e-1"', 'e-1\u3000'];
    for (const id of names) await db.process('edges', failing('no'), [envelope(id)]);
    const r = await cli(at('failed', 'list', '--consumer', 'edges'));
    expect(r.code).toBe(0);
    const [head = '', ...rows] = r.stdout.trimEnd().split('\n');
    const from = head.indexOf('message id');
    const to = head.indexOf('attempts');
    const cells = rows.map((l) => l.slice(from, to).trimEnd());
    expect(new Set(cells).size).toBe(names.length);
    expect(cells.sort()).toEqual(
      ['"\\"e-1\\""', '" e-1"', '"e-1 "', '"e-1\u00a0"', '"e-1\u3000"', 'e-1'].sort(),
    );
    for (const id of names) {
      const one = await cli(at('inspect', 'edges', id));
      expect(one.stdout).toContain(`message id   ${shownName(id)}\n`);
    }
  });
});

describe('property: whatever text a producer stores, failed list and inspect stay on their lines', () => {
  it('ids and error messages of any characters', async () => {
    // Any code point PostgreSQL text can hold (no NUL), weighted towards the controls.
    const control = fc
      .integer({ min: 1, max: 0x9f })
      .filter((c) => c < 0x20 || c >= 0x7f)
      .map((c) => String.fromCodePoint(c));
    const text = fc
      .array(
        fc.oneof(
          control,
          fc.string({ unit: 'grapheme', maxLength: 3 }),
          fc.constantFrom(...Object.values(ATTACKS)),
          // Blanks and quotes, which a name may start or end with.
          fc.constantFrom(' ', '  ', '\u00a0', '\u3000', '\u2028', '"'),
        ),
        {
          minLength: 1,
          maxLength: 8,
        },
      )
      .map((parts) => parts.join(''))
      .filter((s) => !s.includes('\0'));
    let n = 0;
    await fc.assert(
      fc.asyncProperty(text, text, async (idText, message) => {
        const consumer = `prop${n++}`;
        const id = `p-${idText}`;
        await db.process(consumer, failing(message), [envelope(id, Buffer.from(message))]);
        const list = await cli(at('failed', 'list', '--consumer', consumer));
        expectSafe(list, 'failed list');
        expect(list.stdout.trimEnd().split('\n')).toHaveLength(2);
        expect(list.stdout).toContain(shownName(id));
        const one = await cli(at('inspect', consumer, id));
        expect(one.code).toBe(0);
        expectSafe(one, 'inspect');
        expect(one.stdout).toContain(`message id   ${shownName(id)}\n`);
        const j = await cli(at('--json', 'inspect', consumer, id));
        expectSafe(j, 'inspect --json');
        expect(j.json()).toMatchObject({ messageId: id, error: { message } });
      }),
      { numRuns: 40 },
    );
  });
});
