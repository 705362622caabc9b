import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LATEST_SCHEMA_VERSION } from '@once/core/admin';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabases, type TestDatabases } from '../../../../test/support/index.js';
import { migrateWith } from '../../../core/src/schema/migrate.js';
import { MIGRATIONS, type Migration } from '../../../core/src/schema/migrations.js';
import { cli } from './fixtures/cli.js';

// `once --databases <file> --database <name|all>` over three real databases on the one server.
// The file's URLs carry a password (trust authentication takes any): no output shows it.

const SECRET = 'zQmkPw5ecret';
// A newer build's contract migration (core's schema-compat.test.ts): this build refuses its schema.
const CONTRACT: Migration = {
  version: LATEST_SCHEMA_VERSION + 1,
  name: 'short-ids',
  change: 'contract',
  removes: 'message ids longer than 256 characters (inbox.message_id is checked)',
  sql: 'ALTER TABLE {schema}.inbox ADD CONSTRAINT inbox_short_ids CHECK (length(message_id) <= 256);',
};

let dbs: TestDatabases;
let dir: string;
let file: string;
const NAMES = ['tenant-a', 'tenant-b', 'tenant-c'] as const;

function withPassword(url: string): string {
  const u = new URL(url);
  u.password = SECRET;
  return u.toString();
}

function writeFile(name: string, content: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

/** `once` with the databases file; every output checked for the password. */
async function once(argv: string[], env: Record<string, string> = {}) {
  const r = await cli(argv, { env });
  expect(`${r.stdout}\n${r.stderr}`, `${r.stdout}\n${r.stderr}`).not.toContain(SECRET);
  return r;
}

beforeAll(async () => {
  dbs = await createDatabases('cli', 3);
  dir = mkdtempSync(join(tmpdir(), 'once-mdb-'));
  file = writeFile(
    'databases.json',
    Object.fromEntries(NAMES.map((name, i) => [name, withPassword(dbs.urls[i]!)])),
  );
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await dbs.drop();
});

async function version(i: number, schema: string): Promise<number | null> {
  const { rows } = await dbs
    .pool(i)
    .query(
      `SELECT (SELECT max(version)::int FROM ${schema}.schema_version) AS v WHERE EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`,
      [schema],
    )
    .catch(() => ({ rows: [] as { v: number }[] }));
  return rows[0]?.v ?? null;
}

describe('--database all', () => {
  it('migrate: one database refusing as newer fails alone; JSON keyed by name; exit 4', async () => {
    await migrateWith(dbs.pool(1), { schema: 'once' }, [...MIGRATIONS, CONTRACT]);
    const r = await once(['--json', '--databases', file, '--database', 'all', 'migrate']);
    expect(r.code).toBe(4);
    const out = r.json<Record<string, Record<string, unknown>>>();
    expect(Object.keys(out)).toEqual([...NAMES]);
    expect(out['tenant-a']).toMatchObject({
      schema: 'once',
      from: 0,
      to: LATEST_SCHEMA_VERSION,
      changed: true,
    });
    expect(out['tenant-c']).toMatchObject({
      schema: 'once',
      from: 0,
      to: LATEST_SCHEMA_VERSION,
      changed: true,
    });
    expect(out['tenant-b']).toEqual({
      error: { code: 'SCHEMA_TOO_NEW', exitCode: 4, message: expect.stringContaining('upgrade @once/cli') },
    });
    expect(await version(0, 'once')).toBe(LATEST_SCHEMA_VERSION);
    expect(await version(1, 'once')).toBe(LATEST_SCHEMA_VERSION + 1);
    expect(await version(2, 'once')).toBe(LATEST_SCHEMA_VERSION);

    // Text: a section per database, headed by its name; the environment names the file too.
    const text = await once(['--database', 'all', 'migrate'], { ONCE_DATABASES: file });
    expect(text.code).toBe(4);
    const sections = text.stdout.trimEnd().split('\n\n');
    expect(sections).toHaveLength(3);
    expect(sections[0]).toMatch(
      /^database tenant-a\nschema once is up to date \(version \d+; compatible from version \d+\)$/,
    );
    expect(sections[1]).toMatch(/^database tenant-b\nerror: .*upgrade @once\/cli \(SCHEMA_TOO_NEW\)$/);
    expect(sections[2]).toMatch(/^database tenant-c\nschema once is up to date/);
  });

  it('purge and status: each database in turn, JSON keyed by name', async () => {
    const schema = 'once_p';
    const migrated = await once([
      '--json',
      '--databases',
      file,
      '--database',
      'all',
      '--schema',
      schema,
      'migrate',
    ]);
    expect(migrated.code).toBe(0);
    const expired = [30, 0, 12];
    for (const i of [0, 1, 2]) {
      await dbs.pool(i).query(
        `INSERT INTO ${schema}.inbox (consumer, message_id, fingerprint, status, expires_at)
         SELECT 'c', 'old' || g, '\\x00', 'done', now() - interval '1 hour' FROM generate_series(1, $1::int) AS g`,
        [expired[i]],
      );
      await dbs.pool(i).query(
        `INSERT INTO ${schema}.inbox (consumer, message_id, fingerprint, status, expires_at)
         VALUES ('c', 'live', '\\x00', 'done', now() + interval '1 hour')`,
      );
    }
    const status = await once([
      '--json',
      '--databases',
      file,
      '--database',
      'all',
      '--schema',
      schema,
      'status',
    ]);
    expect(status.code).toBe(0);
    const s = status.json<Record<string, { inbox: { totals: { rows: number; expired: number } } }>>();
    expect(Object.keys(s)).toEqual([...NAMES]);
    expect(NAMES.map((n) => s[n]?.inbox.totals)).toEqual(
      expired.map((e) => expect.objectContaining({ rows: e + 1, expired: e })),
    );

    const purged = await once([
      '--json',
      '--databases',
      file,
      '--database',
      'all',
      '--schema',
      schema,
      'purge',
      '--batch-size',
      '10',
    ]);
    expect(purged.code).toBe(0);
    const p = purged.json<Record<string, { deleted: number; expiredBefore: number }>>();
    expect(NAMES.map((n) => [p[n]?.deleted, p[n]?.expiredBefore])).toEqual(expired.map((e) => [e, e]));

    // A name that is a property of every object in JavaScript is a name like any other.
    const proto = writeFile(
      'proto.json',
      `{"__proto__": ${JSON.stringify(withPassword(dbs.urls[0]!))}, "constructor": ${JSON.stringify(withPassword(dbs.urls[2]!))}}`,
    );
    const odd = await once([
      '--json',
      '--databases',
      proto,
      '--database',
      'all',
      '--schema',
      schema,
      'status',
    ]);
    expect(odd.code).toBe(0);
    expect(Object.keys(odd.json())).toEqual(['__proto__', 'constructor']);
    expect(
      (
        await once([
          '--json',
          '--databases',
          proto,
          '--database',
          'constructor',
          '--schema',
          schema,
          'status',
        ])
      ).code,
    ).toBe(0);

    const text = await once(['--databases', file, '--database', 'all', '--schema', schema, 'status']);
    expect(text.code).toBe(0);
    for (const n of NAMES) expect(text.stdout).toContain(`database ${n}\nschema ${schema}: version`);

    // The read-only lists over the set: a section per database.
    await dbs.pool(1).query(
      `INSERT INTO ${schema}.inbox (consumer, message_id, fingerprint, status, error, expires_at)
       VALUES ('billing', 'bad-1', '\\x00', 'failed', '{"name":"PermanentError","message":"no"}', now() + interval '1 day')`,
    );
    const failed = await once([
      '--databases',
      file,
      '--database',
      'all',
      '--schema',
      schema,
      'failed',
      'list',
    ]);
    expect(failed.code).toBe(0);
    expect(failed.stdout).toContain(`database ${NAMES[0]}\nno failed messages`);
    expect(failed.stdout).toMatch(new RegExp(`database ${NAMES[1]}\\nconsumer .*\\nbilling +bad-1`));
    const json = await once([
      '--json',
      '--databases',
      file,
      '--database',
      'all',
      '--schema',
      schema,
      'failed',
      'list',
    ]);
    expect(Object.keys(JSON.parse(json.stdout))).toEqual([...NAMES]);
    const outbox = await once([
      '--databases',
      file,
      '--database',
      'all',
      '--schema',
      schema,
      'outbox',
      'status',
    ]);
    expect(outbox.code).toBe(0);
    for (const n of NAMES) expect(outbox.stdout).toContain(`database ${n}\n`);
  });

  it('purge: Ctrl-C stops between batches and leaves the databases after it out; exit 130', async () => {
    const schema = 'once_p';
    for (const [i, n] of [
      [0, 30],
      [2, 12],
    ] as const) {
      await dbs.pool(i).query(
        `INSERT INTO ${schema}.inbox (consumer, message_id, fingerprint, status, expires_at)
         SELECT 'stop', 'old' || g, '\\x00', 'done', now() - interval '1 hour' FROM generate_series(1, $1::int) AS g`,
        [n],
      );
    }
    const stop = new AbortController();
    const r = await cli(
      ['--databases', file, '--database', 'all', '--schema', schema, 'purge', '--batch-size', '10'],
      {
        env: {},
        signal: stop.signal,
        onStderr: () => stop.abort('SIGINT'),
      },
    );
    expect(r.code).toBe(130);
    expect(`${r.stdout}${r.stderr}`).not.toContain(SECRET);
    expect(r.stdout.trim()).toBe(`database tenant-a\nstopped: purged 10 expired rows from schema ${schema}`);
    const left = async (i: number) =>
      (await dbs.pool(i).query(`SELECT count(*)::int AS n FROM ${schema}.inbox WHERE consumer = 'stop'`))
        .rows[0].n;
    expect([await left(0), await left(2)]).toEqual([20, 12]);
    const rest = await once([
      '--json',
      '--databases',
      file,
      '--database',
      'all',
      '--schema',
      schema,
      'purge',
    ]);
    expect(rest.code).toBe(0);
    expect(Object.values(rest.json<Record<string, { deleted: number }>>()).map((p) => p.deleted)).toEqual([
      20, 0, 12,
    ]);
  });

  it('an unreachable database: its section says so, the others run, exit 3, no password printed', async () => {
    const withDown = writeFile('with-down.json', {
      'tenant-a': withPassword(dbs.urls[0]!),
      down: `postgres://postgres:${SECRET}@127.0.0.1:1/none`,
      'tenant-c': withPassword(dbs.urls[2]!),
    });
    const r = await once([
      '--json',
      '--databases',
      withDown,
      '--database',
      'all',
      '--schema',
      'once_p',
      'status',
    ]);
    expect(r.code).toBe(3);
    const out = r.json<Record<string, { error?: { code: string; message: string }; version?: number }>>();
    expect(out['tenant-a']?.version).toBe(LATEST_SCHEMA_VERSION);
    expect(out['tenant-c']?.version).toBe(LATEST_SCHEMA_VERSION);
    expect(out.down?.error).toMatchObject({ code: 'DATABASE_UNREACHABLE' });
    expect(out.down?.error?.message).toContain('postgres://postgres:***@127.0.0.1:1/none');
    const text = await once(['--databases', withDown, '--database', 'all', '--schema', 'once_p', 'status']);
    expect(text.code).toBe(3);
    expect(text.stdout).toMatch(
      /database down\nerror: cannot connect to postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/none/,
    );
  });

  it('is refused by commands that work on one database, which take a name', async () => {
    const r = await once(['--json', '--databases', file, '--database', 'all', 'inspect', 'c', 'id']);
    expect(r.code).toBe(2);
    expect(r.errorJson().error).toEqual({
      code: 'DATABASE_ALL_REFUSED',
      exitCode: 2,
      message:
        '--database all works with migrate, purge, status, failed list, outbox status; inspect works on one database: pass --database <name>',
    });
    const outbox = await once(['--databases', file, '--database', 'all', 'outbox', 'retry', '--all-failed']);
    expect(outbox.code).toBe(2);
    expect(outbox.stderr).toContain('outbox retry works on one database');
    const named = await once([
      '--json',
      '--databases',
      file,
      '--database',
      'tenant-a',
      '--schema',
      'once_p',
      'inspect',
      'c',
      'live',
    ]);
    expect(named.code).toBe(0);
    expect(named.json()).toMatchObject({ consumer: 'c', messageId: 'live', status: 'done' });
  });
});

describe('usage errors', () => {
  it('an unknown name suggests the nearest', async () => {
    const r = await once(['--json', '--databases', file, '--database', 'tennat-b', 'status']);
    expect(r.code).toBe(2);
    expect(r.errorJson().error).toMatchObject({
      code: 'UNKNOWN_DATABASE',
      message:
        '--database "tennat-b" is not in the databases file; did you mean "tenant-b"? (known: tenant-a, tenant-b, tenant-c, or all)',
    });
    const far = await once(['--databases', file, '--database', 'nosuch', 'status']);
    expect(far.code).toBe(2);
    expect(far.stderr).toBe(
      'once: --database "nosuch" is not in the databases file (known: tenant-a, tenant-b, tenant-c, or all)\n',
    );
  });

  it('--database without a file or beside --database-url, --databases without --database', async () => {
    const none = await once(['--json', '--database', 'tenant-a', 'status'], {});
    expect(none.code).toBe(2);
    expect(none.errorJson().error.code).toBe('NO_DATABASES_FILE');
    const both = await once([
      '--json',
      '--databases',
      file,
      '--database',
      'tenant-a',
      '--database-url',
      dbs.urls[0]!,
      'status',
    ]);
    expect(both.code).toBe(2);
    expect(both.errorJson().error.code).toBe('CONFLICTING_OPTIONS');
    const unchosen = await once(['--databases', file, 'status']);
    expect(unchosen.code).toBe(2);
    expect(unchosen.stderr).toBe(
      'once: --databases needs --database <name>, or --database all (migrate, purge, status, failed list, outbox status)\n',
    );
    // ONCE_DATABASES alone changes nothing: DATABASE_URL is the database, and the file is not read.
    const envOnly = await once(['--json', 'status', '--schema', 'once_p'], {
      ONCE_DATABASES: join(dir, 'missing.json'),
      DATABASE_URL: withPassword(dbs.urls[2]!),
    });
    expect(envOnly.code).toBe(0);
    expect(envOnly.json()).toMatchObject({ schema: 'once_p', version: LATEST_SCHEMA_VERSION });
  });

  it('a file that is not a JSON object of names to URLs, never quoting a password', async () => {
    const cases: [unknown, string, RegExp][] = [
      [`{"a": "postgres://u:${SECRET}@127.0.0.1/db",`, 'INVALID_DATABASES_FILE', /is not valid JSON$/],
      [[`postgres://u:${SECRET}@127.0.0.1/db`], 'INVALID_DATABASES_FILE', /must hold a JSON object/],
      [{}, 'INVALID_DATABASES_FILE', /names no database$/],
      [
        { 'tenant a': `postgres://u:${SECRET}@127.0.0.1/db` },
        'INVALID_DATABASES_FILE',
        /databases\.tenant a is not a database name/,
      ],
      [{ a: 5432 }, 'INVALID_DATABASES_FILE', /databases\.a must be a postgres:\/\/ URL string, got number$/],
      [
        { all: `postgres://u:${SECRET}@127.0.0.1/db` },
        'INVALID_DATABASES_FILE',
        /databases\.all: "all" cannot name a database, since --database all means every one of them; rename it$/,
      ],
      [
        { a: `mysql://u:${SECRET}@127.0.0.1/db` },
        'INVALID_DATABASE_URL',
        /^databases\.a must be a postgres:\/\/ URL, got "mysql:\/\/u:\*\*\*@127\.0\.0\.1\/db"$/,
      ],
      // An unencoded "/" in the password: refused, masked.
      [
        { b: `postgres://u:pa/${SECRET}@127.0.0.1/db` },
        'INVALID_DATABASE_URL',
        /^databases\.b is not a valid URL, got "postgres:\/\/u:\*\*\*@127\.0\.0\.1\/db"/,
      ],
    ];
    for (const [i, [content, code, message]] of cases.entries()) {
      const path = writeFile(`bad-${i}.json`, content);
      for (const json of [true, false]) {
        const r = await once([
          ...(json ? ['--json'] : []),
          '--databases',
          path,
          '--database',
          'all',
          'migrate',
        ]);
        expect(r.code, r.stderr).toBe(2);
        if (json) {
          expect(r.errorJson().error.code, r.stderr).toBe(code);
          expect(r.errorJson().error.message.replace(/^(--databases|ONCE_DATABASES): /, '')).toMatch(message);
        }
      }
    }
    const missing = await once([
      '--json',
      '--databases',
      join(dir, 'missing.json'),
      '--database',
      'all',
      'migrate',
    ]);
    expect(missing.errorJson().error).toMatchObject({
      code: 'INVALID_DATABASES_FILE',
      message: expect.stringContaining('(ENOENT)'),
    });
  });
});

describe('no output shows a password of the databases file', () => {
  // As password-leak.test.ts does for --database-url: every piece of the password that is not a
  // delimiter holds a marker, so a leak of any piece, however a parser cut the URL, shows one.
  const MARKERS = ['zQmk', 'pWxv', 'tRjy'] as const;
  const printable = fc.string({ unit: 'grapheme', maxLength: 3 }).filter((t) => !/\p{Cc}/u.test(t));
  const password = fc
    .array(
      fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom(...MARKERS) },
        { weight: 3, arbitrary: fc.constantFrom('/', '@', ':', '?', '#', '%', ' ', '%2F', '%ff', '"', '\\') },
        { weight: 2, arbitrary: printable },
      ),
      { maxLength: 8 },
    )
    .map((parts) => `${parts.join('')}${MARKERS[0]}`);

  it('whatever the password, the command, the database picked, text or --json', async () => {
    const real = new URL(dbs.urls[0]!);
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          password,
          closed: fc.boolean(),
          pick: fc.constantFrom('all', 'x', 'y', 'nosuch'),
          command: fc.constantFrom(
            ['status'],
            ['migrate'],
            ['purge'],
            ['inspect', 'c', 'id'],
            ['failed', 'list'],
          ),
          json: fc.boolean(),
        }),
        async (c) => {
          const url = `postgres://postgres:${c.password}@127.0.0.1:${c.closed ? '1' : real.port || '5432'}${real.pathname}`;
          const path = writeFile('leak.json', { x: url, y: url });
          const r = await cli(
            [...(c.json ? ['--json'] : []), '--databases', path, '--database', c.pick, ...c.command],
            {
              env: {},
            },
          );
          const all = `${r.stdout}\n${r.stderr}`;
          const label = `${JSON.stringify(c)}\n${all}`;
          expect(all.includes(c.password), label).toBe(false);
          expect(
            MARKERS.find((m) => all.includes(m)),
            label,
          ).toBeUndefined();
        },
      ),
      { numRuns: 150 },
    );
  });
});
