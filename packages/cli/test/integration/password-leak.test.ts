import { execFile } from 'node:child_process';
import dns from 'node:dns';
import { fileURLToPath } from 'node:url';
import { migrate } from '@once/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName, serviceEnv } from '../../../../test/support/index.js';
import { cli } from './fixtures/cli.js';

// No output of any command, text or --json, stdout or stderr, holds the password of the database
// URL or any piece of it, whatever printable characters it has (an unencoded `/`, `@`, `:`, `?`,
// `#`, `%`, spaces) and wherever the URL comes from, against a closed loopback port and against
// the real database (trust authentication: any password connects). The built bin runs as a child
// process; the same property runs in-process too, where many more cases fit.

const BIN = fileURLToPath(new URL('../../dist/bin.js', import.meta.url));
const NO_DNS = fileURLToPath(new URL('./fixtures/no-dns.mjs', import.meta.url));
const real = new URL(serviceEnv('DATABASE_URL'));
const CLOSED_PORT = '1';

// Every piece of a password that is not a delimiter is a marker (or holds one), so a leak of any
// piece of it, however a parser cut the URL, shows a marker. The markers start with two letters
// that are not hex digits: a `%` before one never decodes it into something else.
const MARKERS = ['zQmk', 'pWxv', 'tRjy', 'kVns'] as const;
const leakedMarker = (text: string) => MARKERS.find((m) => text.includes(m));
/** Printable ASCII and beyond, no control characters. */
const printable = fc.string({ unit: 'grapheme', maxLength: 3 }).filter((s) => !/\p{Cc}/u.test(s));
const password = fc
  .tuple(
    // Digits first: before a "/", "?" or "#" they parse as a port, and the URL as one whose host
    // is the user name.
    fc.constantFrom('', '', '5432', '1'),
    fc.array(
      fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom(...MARKERS) },
        {
          weight: 3,
          arbitrary: fc.constantFrom('/', '@', ':', '?', '#', '%', ' ', '%2F', '%4', '%ff', '&', '='),
        },
        { weight: 2, arbitrary: printable },
      ),
      { maxLength: 8 },
    ),
  )
  .map(([digits, parts]) => `${digits}${parts.join('')}${MARKERS[0]}`);

let schema: string;
const COMMANDS = (): readonly (readonly string[])[] => [
  ['migrate'],
  ['status'],
  ['inspect', 'c', 'id'],
  ['failed', 'list'],
  ['failed', 'retry', 'c', 'id', '--out', '/dev/null'],
  ['failed', 'discard', 'c', 'id'],
  ['forget', 'c', 'id', '--yes'],
  ['forget', 'c', '--since', '1d', '--yes'],
  ['purge'],
  ['outbox', 'status'],
  ['outbox', 'retry', '--all-failed'],
  ['outbox', 'retry', '--id', 'x'],
];
/** What each command exits with on the real database, on the fresh schema of this file. */
const ON_REAL_DB: Readonly<Record<string, number>> = {
  'inspect c id': 5,
  'failed retry c id --out /dev/null': 5,
  'failed discard c id': 5,
  'forget c id --yes': 5,
  'outbox retry --id x': 5,
};

interface Case {
  readonly password: string;
  readonly target: 'closed' | 'real';
  readonly source: 'flag' | 'flag=' | 'env' | 'mistyped flag';
  readonly command: readonly string[];
  readonly json: boolean;
  readonly globalsFirst: boolean;
}

const cases = fc.record({
  password,
  target: fc.constantFrom('closed', 'real'),
  source: fc.constantFrom('flag', 'flag=', 'env', 'mistyped flag'),
  command: fc.integer({ min: 0, max: 11 }).map((i) => COMMANDS()[i] ?? ['status']),
  json: fc.boolean(),
  globalsFirst: fc.boolean(),
}) as fc.Arbitrary<Case>;

/** The URL as a user would paste it: the password not encoded. */
function urlOf(c: Case): string {
  const port = c.target === 'closed' ? CLOSED_PORT : real.port || '5432';
  return `postgres://${real.username}:${c.password}@127.0.0.1:${port}${real.pathname}`;
}

function argvOf(c: Case): { argv: string[]; env: Record<string, string> } {
  const url = urlOf(c);
  const globals = [...(c.json ? ['--json'] : []), '--schema', schema];
  let env: Record<string, string> = {};
  if (c.source === 'flag') globals.push('--database-url', url);
  else if (c.source === 'flag=') globals.push(`--database-url=${url}`);
  else if (c.source === 'env') env = { DATABASE_URL: url };
  else {
    // A typo: the argument parser refuses the option and quotes it.
    globals.push(`--database-ur=${url}`);
    env = { DATABASE_URL: serviceEnv('DATABASE_URL') };
  }
  const argv = c.globalsFirst ? [...globals, ...c.command] : [...c.command, ...globals];
  return { argv, env };
}

/** The exit code the test expects, by its own reading of the URL. */
function expectedExit(c: Case): number {
  if (c.source === 'mistyped flag') return 2;
  // Any of these ends the host inside the password, so an "@" follows the host: refused.
  if (/[/?#]/.test(c.password)) return 2;
  try {
    decodeURIComponent(c.password);
  } catch {
    return 2;
  }
  if (c.target === 'closed') return 3;
  return ON_REAL_DB[c.command.join(' ')] ?? 0;
}

function check(c: Case, out: { code: number; stdout: string; stderr: string }): void {
  const all = `${out.stdout}\n${out.stderr}`;
  const label = `${JSON.stringify(c)}\nstdout: ${out.stdout}\nstderr: ${out.stderr}`;
  expect(all.includes(c.password), label).toBe(false);
  expect(leakedMarker(all), label).toBeUndefined();
  expect(out.stderr, label).not.toContain('no-dns');
  expect(out.code, label).toBe(expectedExit(c));
}

let lookups: string[] = [];
const realLookup = dns.lookup;

beforeAll(async () => {
  const pool = createTestPool();
  schema = freshSchemaName('cli_pwleak');
  await migrate(pool, { schema });
  await pool.end();
  // In-process runs: no lookup leaves the machine either (see fixtures/no-dns.mjs).
  dns.lookup = ((host: string, ...rest: unknown[]) => {
    lookups.push(host);
    const callback = rest.at(-1) as (err: Error) => void;
    process.nextTick(
      callback,
      Object.assign(new Error('getaddrinfo ENOTFOUND (no-dns)'), { code: 'ENOTFOUND' }),
    );
  }) as typeof dns.lookup;
});
afterAll(async () => {
  dns.lookup = realLookup;
  const pool = createTestPool();
  await dropSchema(pool, schema).catch(() => {});
  await pool.end();
});

describe('no output of any command holds the database password', () => {
  it('in-process: every command, text and --json, flag or environment, closed port or real database', async () => {
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        lookups = [];
        const { argv, env } = argvOf(c);
        const r = await cli(argv, { env });
        check(c, r);
        expect(lookups, JSON.stringify(c)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('the built bin as a child process', async () => {
    await fc.assert(
      fc.asyncProperty(cases, async (c) => {
        const { argv, env } = argvOf(c);
        const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
          execFile(
            process.execPath,
            ['--import', NO_DNS, BIN, ...argv],
            { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 60_000 },
            (err, stdout, stderr) => {
              const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
              resolve({ code, stdout, stderr });
            },
          );
        });
        check(c, r);
      }),
      { numRuns: 20 },
    );
  });

  it('examples: the refusals name the fix and show the URL masked', async () => {
    const slash = await cli([
      'status',
      '--database-url',
      `postgres://app:se/cretzQmk@127.0.0.1:${CLOSED_PORT}/db`,
    ]);
    expect(slash.code).toBe(2);
    expect(slash.stderr.trim()).toBe(
      'once: --database-url is not a valid URL, got "postgres://app:***@127.0.0.1:1/db" ' +
        '(a "/", "?", "#" or "@" in a user name or password is percent-encoded: %2F, %3F, %23, %40)',
    );
    // Digits before the "/" parse as a port: the host would be the user name.
    const digits = await cli([
      'status',
      '--database-url',
      `postgres://app:12/cretzQmk@127.0.0.1:${CLOSED_PORT}/db`,
    ]);
    expect(digits.code).toBe(2);
    expect(digits.stderr.trim()).toBe(
      'once: --database-url has an "@" after its host, so where its password ends is unclear: ' +
        'percent-encode "/", "?", "#" and "@" in the user name and password (%2F, %3F, %23, %40) ' +
        'and an "@" after the host (%40); got "postgres://app:***@127.0.0.1:1/db"',
    );
    const fromEnv = await cli(['--json', 'status'], {
      env: { DATABASE_URL: `postgres://app:a%ffzQmk@127.0.0.1:${CLOSED_PORT}/db` },
    });
    expect(fromEnv.errorJson().error).toEqual({
      code: 'INVALID_DATABASE_URL',
      exitCode: 2,
      message:
        'DATABASE_URL has a "%" in its user name or password that is not a percent-encoding of UTF-8: ' +
        'write "%" as %25; got "postgres://app:***@127.0.0.1:1/db"',
    });
    const typo = await cli([
      'status',
      `--database-ur=postgres://app:se/cretzQmk@127.0.0.1:${CLOSED_PORT}/db`,
    ]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain("unknown option '--database-ur=postgres://app:***@127.0.0.1:1/db'");
    // Encoded, the same password is accepted and reaches the server.
    const encoded = await cli(['--schema', schema, 'status'], {
      env: {
        DATABASE_URL: `postgres://${real.username}:${encodeURIComponent('se/cr?e#t@ %')}@127.0.0.1:${real.port || '5432'}${real.pathname}`,
      },
    });
    expect(encoded.code, encoded.stderr).toBe(0);
  });
});
