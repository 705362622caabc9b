import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { compatibleFrom, LATEST_SCHEMA_VERSION, MIGRATIONS } from '@once/core/admin';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestPool,
  dropSchema,
  freshSchemaName,
  quoteIdent,
  serviceEnv,
} from '../../../../test/support/index.js';
import { cli, freshOnce, installUpTo } from './fixtures/cli.js';

// Every error path of the CLI against the real server: wrong URLs (exit 3, password masked),
// schemas missing, old or too new (4), bad flags (2), and the built bin as a child process.

const DATABASE_URL = serviceEnv('DATABASE_URL');
const BIN = fileURLToPath(new URL('../../dist/bin.js', import.meta.url));

/** The test server's URL with another port, database or password. */
function urlWith(patch: { port?: string; pathname?: string; password?: string }): string {
  const u = new URL(DATABASE_URL);
  if (patch.port !== undefined) u.port = patch.port;
  if (patch.pathname !== undefined) u.pathname = patch.pathname;
  if (patch.password !== undefined) u.password = patch.password;
  return u.toString();
}

const EVERY_COMMAND: readonly (readonly string[])[] = [
  ['status'],
  ['inspect', 'c', 'id'],
  ['failed', 'list'],
  ['failed', 'retry', 'c', 'id', '--out', '/dev/null'],
  ['failed', 'discard', 'c', 'id'],
  ['forget', 'c', 'id', '--yes'],
  ['purge'],
  ['outbox', 'status'],
  ['outbox', 'retry', '--all-failed'],
];

describe('an unreachable database is exit 3, one line naming the URL with the password masked', () => {
  it('connection refused', async () => {
    const url = urlWith({ port: '1', password: 's3cret-pw' });
    const r = await cli(['--database-url', url, 'status']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('cannot connect to');
    expect(r.stderr).toContain(':***@');
    expect(r.stderr).not.toContain('s3cret-pw');
    expect(r.stderr).toMatch(/ECONNREFUSED/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).toBe('');
  });

  it('an unknown database', async () => {
    const r = await cli(['status'], { env: { DATABASE_URL: urlWith({ pathname: '/no_such_db_once_cli' }) } });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('database "no_such_db_once_cli" does not exist');
  });

  it('an unknown role (authentication)', async () => {
    const u = new URL(DATABASE_URL);
    u.username = 'no_such_role_once_cli';
    u.password = 'hunter2';
    const r = await cli(['--database-url', u.toString(), 'migrate']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('no_such_role_once_cli:***@');
    expect(r.stderr).not.toContain('hunter2');
  });

  it('every command checks the connection the same way, and --json reports it as JSON', async () => {
    for (const argv of [['migrate'], ...EVERY_COMMAND]) {
      const r = await cli(['--json', '--database-url', urlWith({ port: '1', password: 'pw' }), ...argv]);
      expect(r.code, argv.join(' ')).toBe(3);
      expect(r.errorJson().error).toMatchObject({ code: 'DATABASE_UNREACHABLE', exitCode: 3 });
      expect(r.errorJson().error.message).not.toContain(':pw@');
    }
  });
});

describe('usage errors are exit 2', () => {
  it('no database URL at all', async () => {
    const r = await cli(['status'], { env: {} });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('pass --database-url <url> or set DATABASE_URL');
  });

  it('a URL that is not postgres://, masked in the message', async () => {
    const r = await cli(['--database-url', 'mysql://root:topsecret@localhost/db', 'status']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('must be a postgres:// URL');
    expect(r.stderr).not.toContain('topsecret');
  });

  it('a schema name that is not a plain identifier is refused before connecting', async () => {
    for (const schema of ['Once', 'x;drop table y', '1abc', '']) {
      const r = await cli(['--schema', schema, '--database-url', urlWith({ port: '1' }), 'status']);
      expect(r.code, schema).toBe(2);
      expect(r.stderr).toContain('--schema must be a lower-case SQL identifier');
    }
  });

  it.each([
    [['status', '--bogus'], "unknown option '--bogus'"],
    [['nope'], "unknown command 'nope'"],
    [['statuz'], 'Did you mean status?'],
    [['inspect', 'only-consumer'], "missing required argument 'id'"],
    [['purge', '--batch-size', '0'], 'must be a whole number >= 1'],
    [['purge', '--batch-size', 'ten'], 'must be a whole number >= 1, got "ten"'],
    [['failed', 'list', '--limit', '-3'], 'must be a whole number >= 1'],
    [['inspect', 'c', 'id', '--body-bytes', '1.5'], 'must be a whole number >= 0'],
    [['outbox', 'retry'], 'exactly one of --id <message id> and --all-failed'],
    [['outbox', 'retry', '--id', '7e0a5c2e-0000-4000-8000-000000000000', '--all-failed'], 'exactly one of'],
    [
      ['outbox', 'retry', '--id', 'x'.repeat(513)],
      '--id must be an outbox message id of 1 to 512 characters, got 513',
    ],
    [['failed', 'retry', 'c', 'id', '--to', 'orders'], '--to and --key only apply with --republish'],
    [['failed', 'retry', 'c', 'id', '--out', '-', '--json'], '--out - cannot be combined with --json'],
  ])('%j', async (argv, message) => {
    // A refused port: usage checks must come before any connection attempt.
    const r = await cli([...argv, '--database-url', urlWith({ port: '1' })]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
  });

  it('a group without its subcommand shows help on stderr and is exit 2', async () => {
    for (const argv of [[], ['failed'], ['outbox']]) {
      const r = await cli(argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr).toContain('Usage: once');
    }
  });

  it.each([
    [['status', '--bogus'], 'UNKNOWN_OPTION', "unknown option '--bogus'"],
    [['nope'], 'UNKNOWN_COMMAND', "unknown command 'nope'"],
    [['inspect', 'only-consumer'], 'MISSING_ARGUMENT', "missing required argument 'id'"],
    [['status', 'extra'], 'EXCESS_ARGUMENTS', 'too many arguments'],
    [['purge', '--batch-size'], 'MISSING_OPTION_VALUE', "option '--batch-size <n>' argument missing"],
    [['purge', '--batch-size', 'ten'], 'INVALID_ARGUMENT', 'must be a whole number >= 1'],
    [['failed'], 'MISSING_SUBCOMMAND', 'a subcommand is missing'],
  ])(
    "--json: %j is one JSON line on stderr with the CLI's own code %s, never commander's",
    async (argv, code, message) => {
      const r = await cli(['--json', ...argv]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      const { error } = r.errorJson();
      expect(error).toMatchObject({ code, exitCode: 2 });
      expect(error.message).toContain(message);
      expect(error.code).not.toMatch(/^commander\./);
    },
  );
});

describe('--help everywhere, with the exit codes', () => {
  it.each([
    [[]],
    [['migrate']],
    [['status']],
    [['inspect']],
    [['failed']],
    [['failed', 'list']],
    [['failed', 'retry']],
    [['failed', 'discard']],
    [['forget']],
    [['purge']],
    [['outbox']],
    [['outbox', 'status']],
    [['outbox', 'retry']],
  ])('%j --help', async (argv) => {
    const r = await cli([...argv, '--help'], { env: {} });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Usage: once${argv.length ? ` ${argv.join(' ')}` : ''}`);
    expect(r.stdout).toContain('Exit codes:');
    expect(r.stdout).toContain('5  not found');
  });

  it.each([[['failed', 'list']], [['purge']], [['forget']], [['outbox', 'retry']], [['status']]])(
    '%j --help lists the global options too',
    async (argv) => {
      const r = await cli([...argv, '--help'], { env: {} });
      expect(r.stdout).toContain('Global Options:');
      for (const flag of ['--database-url <url>', '--schema <name>', '--json', '-V, --version']) {
        expect(r.stdout).toContain(flag);
      }
    },
  );

  it('help <command> and --version', async () => {
    expect((await cli(['help', 'purge'])).stdout).toContain('--batch-size <n>');
    const v = await cli(['--version']);
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe('schema not installed, too old or too new: exit 4', () => {
  const pool = createTestPool({ max: 2 });
  const missing = freshSchemaName('cli_missing');
  let old: { schema: string; close: () => Promise<void> };
  let newer: Awaited<ReturnType<typeof freshOnce>>;
  beforeAll(async () => {
    // A database left at version 1 (before the outbox).
    old = { schema: freshSchemaName('cli_v1'), close: () => dropSchema(pool, old.schema) };
    await installUpTo(pool, old.schema, 1);
    newer = await freshOnce('cli_v99');
    await newer.pool.query(
      `INSERT INTO ${quoteIdent(newer.schema)}.schema_version (version, name) VALUES (99, 'future')`,
    );
  });
  afterAll(async () => {
    await dropSchema(pool, missing);
    await old.close();
    await newer.close();
    await pool.end();
  });

  it('an unmigrated database: every command but migrate says to run `once migrate`', async () => {
    for (const argv of EVERY_COMMAND) {
      const r = await cli(['--schema', missing, ...argv]);
      expect(r.code, argv.join(' ')).toBe(4);
      expect(r.stderr.trim()).toBe(
        `once: schema ${missing} is not installed: run \`once migrate --schema ${missing}\``,
      );
    }
    const j = await cli(['--schema', missing, '--json', 'status']);
    expect(j.errorJson().error).toMatchObject({ code: 'SCHEMA_NOT_INSTALLED', exitCode: 4 });
  });

  it('a schema at an older version: status shows what exists, the rest ask for migrate', async () => {
    const s = await cli(['--schema', old.schema, 'status']);
    expect(s.code).toBe(0);
    expect(s.stdout).toContain(
      `version 1, this once needs ${LATEST_SCHEMA_VERSION}: run \`once migrate --schema ${old.schema}\``,
    );
    expect(s.stdout).toContain('outbox: not installed');
    const j = await cli(['--schema', old.schema, '--json', 'status']);
    expect(j.json()).toMatchObject({ version: 1, upToDate: false, outbox: null });
    for (const argv of EVERY_COMMAND.filter((a) => a[0] !== 'status')) {
      const r = await cli(['--schema', old.schema, ...argv]);
      expect(r.code, argv.join(' ')).toBe(4);
      expect(r.stderr).toContain(`is at version 1, this once needs ${LATEST_SCHEMA_VERSION}`);
    }
  });

  it('a newer schema that records no oldest compatible version: every command, migrate included', async () => {
    for (const argv of [['migrate'], ...EVERY_COMMAND]) {
      const r = await cli(['--schema', newer.schema, ...argv]);
      expect(r.code, argv.join(' ')).toBe(4);
      expect(r.stderr).toContain(
        `version 99 and records no oldest compatible version (written by hand or by a tool that does not record one); this once is at schema version ${LATEST_SCHEMA_VERSION}: upgrade @once/cli`,
      );
    }
  });

  it('a newer schema whose contract migration removed what this build uses: every command, migrate included', async () => {
    const contract = await freshOnce('cli_contract');
    try {
      const v = LATEST_SCHEMA_VERSION;
      await contract.pool.query(
        `INSERT INTO ${quoteIdent(contract.schema)}.schema_version (version, name, compatible_from, removes)
         VALUES ($1, 'wide-ids', $3, NULL), ($2, 'drop-body', $2, 'inbox.body')`,
        [v + 1, v + 2, compatibleFrom(MIGRATIONS, v)],
      );
      for (const argv of [['migrate'], ...EVERY_COMMAND]) {
        const r = await cli(['--schema', contract.schema, ...argv]);
        expect(r.code, argv.join(' ')).toBe(4);
        expect(r.stderr.trim()).toBe(
          `once: schema ${contract.schema} is at version ${v + 2}, and version ${v + 2} (drop-body) removed inbox.body: ` +
            `it runs code of schema version ${v + 2} or later; this once is at schema version ${v}: upgrade @once/cli`,
        );
      }
      const j = await cli(['--schema', contract.schema, '--json', 'status']);
      expect(j.errorJson().error).toMatchObject({ code: 'SCHEMA_TOO_NEW', exitCode: 4 });
    } finally {
      await contract.close();
    }
  });
});

describe('a newer schema that only expanded: this once runs on it', () => {
  let ahead: Awaited<ReturnType<typeof freshOnce>>;
  const v = LATEST_SCHEMA_VERSION;
  // An additive migration leaves the oldest compatible version where this build's schema has it.
  const from = compatibleFrom(MIGRATIONS, v);
  beforeAll(async () => {
    ahead = await freshOnce('cli_ahead');
    // What a newer release's migrate() writes for an additive migration.
    await ahead.pool.query(
      `INSERT INTO ${quoteIdent(ahead.schema)}.schema_version (version, name, compatible_from) VALUES ($1, 'wide-ids', $2)`,
      [v + 1, from],
    );
  });
  afterAll(async () => {
    await ahead.close();
  });

  it('status and migrate say so, exit 0; migrate changes nothing', async () => {
    const s = await cli(['--schema', ahead.schema, 'status']);
    expect(s.code).toBe(0);
    expect(s.stdout.split('\n')[0]).toBe(
      `schema ${ahead.schema}: version ${v + 1}, newer than this once (${v}); compatible from version ${from}, so this once runs on it`,
    );
    const j = await cli(['--schema', ahead.schema, '--json', 'status']);
    expect(j.json()).toMatchObject({
      version: v + 1,
      latestVersion: v,
      status: 'ahead',
      compatibleFrom: from,
      upToDate: true,
    });
    const m = await cli(['--schema', ahead.schema, 'migrate']);
    expect(m.code).toBe(0);
    expect(m.stdout.trim()).toBe(
      `schema ${ahead.schema} is at version ${v + 1}, newer than this once (${v}), and compatible from version ${from}: nothing to do`,
    );
    const mj = await cli(['--schema', ahead.schema, '--json', 'migrate']);
    expect(mj.json()).toEqual({
      schema: ahead.schema,
      from: v + 1,
      to: v + 1,
      compatibleFrom: from,
      changed: false,
    });
  });

  it('the other commands run', async () => {
    for (const argv of [['failed', 'list'], ['purge'], ['outbox', 'status']]) {
      const r = await cli(['--schema', ahead.schema, ...argv]);
      expect(r.code, `${argv.join(' ')}: ${r.stderr}`).toBe(0);
    }
  });
});

describe('the built bin', () => {
  const exec = promisify(execFile);

  it('node packages/cli/dist/bin.js --help runs through the shebang file and exits 0', async () => {
    const { stdout } = await exec(process.execPath, [BIN, '--help']);
    expect(stdout).toContain('Usage: once');
    expect(stdout).toContain('Exit codes:');
  });

  it('starts with a node shebang and sets the exit code of a failed command', async () => {
    const { readFile } = await import('node:fs/promises');
    expect((await readFile(BIN, 'utf8')).startsWith('#!/usr/bin/env node\n')).toBe(true);
    const err = await exec(process.execPath, [BIN, 'status'], {
      env: { ...process.env, DATABASE_URL: urlWith({ port: '1', password: 'pw' }) },
    }).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 3 });
    expect((err as { stderr: string }).stderr).toContain(':***@');
  });
});
