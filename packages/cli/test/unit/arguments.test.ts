import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../src/io.js';
import { integerAtLeast } from '../../src/parse-args.js';
import { buildProgram, type Execute } from '../../src/program.js';
import { run } from '../../src/run.js';

function io(env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const value: CliIo = {
    stdout: { write: (c) => out.push(String(c)) },
    stderr: { write: (c) => err.push(String(c)) },
    env,
  };
  return { value, out, err };
}

/** Parses argv with an `execute` that records what the command received instead of connecting. */
async function parse(argv: string[]) {
  const seen: {
    name: string;
    opts: Record<string, unknown>;
    globals: Record<string, unknown>;
    args: string[];
  }[] = [];
  const execute: Execute = async (command: Command) => {
    seen.push({
      name: command.name(),
      opts: command.opts(),
      globals: command.optsWithGlobals(),
      args: command.args,
    });
  };
  const program = buildProgram(io().value, execute, () => false);
  await program.parseAsync(argv, { from: 'user' });
  return seen[0];
}

describe('integerAtLeast', () => {
  it('accepts whole numbers from min, refuses the rest with the rule', () => {
    const p = integerAtLeast(1);
    expect(p('1')).toBe(1);
    expect(p(' 42 ')).toBe(42);
    for (const bad of ['0', '-1', '1.5', '1e3', 'ten', '', '99999999999999999999']) {
      expect(() => p(bad), bad).toThrow(/must be a whole number >= 1/);
    }
    expect(integerAtLeast(0)('0')).toBe(0);
  });
});

describe('argument parsing', () => {
  it('defaults: schema once, no json, no url (DATABASE_URL is read later)', async () => {
    const s = await parse(['status']);
    expect(s?.name).toBe('status');
    expect(s?.globals).toEqual({ schema: 'once' });
  });

  it('global options before or after the command', async () => {
    const before = await parse([
      '--schema',
      'billing',
      '--json',
      '--database-url',
      'postgres://h/db',
      'status',
    ]);
    const after = await parse([
      'status',
      '--schema',
      'billing',
      '--json',
      '--database-url',
      'postgres://h/db',
    ]);
    for (const s of [before, after]) {
      expect(s?.globals).toEqual({ schema: 'billing', json: true, databaseUrl: 'postgres://h/db' });
    }
  });

  it('command options are parsed to numbers with their defaults', async () => {
    expect((await parse(['purge']))?.opts).toEqual({ batchSize: 5000, pauseMs: 0 });
    expect(
      (await parse(['purge', '--batch-size', '50', '--max-rows', '0', '--pause-ms', '5']))?.opts,
    ).toEqual({
      batchSize: 50,
      maxRows: 0,
      pauseMs: 5,
    });
    expect((await parse(['purge', '--rows-per-second', '5600']))?.opts).toEqual({
      batchSize: 5000,
      pauseMs: 0,
      rowsPerSecond: 5600,
    });
    expect((await parse(['failed', 'list']))?.opts).toEqual({ limit: 100 });
    expect((await parse(['inspect', 'c', 'i']))?.opts).toEqual({ bodyBytes: 200 });
    expect((await parse(['inspect', 'c', 'i']))?.args).toEqual(['c', 'i']);
    expect((await parse(['outbox', 'retry', '--all-failed']))?.opts).toEqual({ allFailed: true });
    expect((await parse(['failed', 'retry', 'c', 'i', '--out', 'f', '--forget-steps']))?.opts).toEqual({
      out: 'f',
      forgetSteps: true,
    });
  });

  it('ids that look like options can follow --', async () => {
    expect((await parse(['inspect', 'c', '--', '--weird-id']))?.args).toEqual(['c', '--weird-id']);
  });
});

describe('run without a database', () => {
  it('usage errors never need the database and are exit 2', async () => {
    for (const argv of [
      ['status', '--nope'],
      ['purge', '--batch-size', '0'],
      ['purge', '--rows-per-second', '0'],
      ['inspect'],
      ['frobnicate'],
    ]) {
      const i = io();
      expect(await run(argv, i.value), argv.join(' ')).toBe(2);
      expect(i.err.join('')).toMatch(/error: /);
      expect(i.out.join('')).toBe('');
    }
  });

  it('no URL anywhere is exit 2 with what to do', async () => {
    const i = io();
    expect(await run(['status'], i.value)).toBe(2);
    expect(i.err.join('')).toBe('once: no database: pass --database-url <url> or set DATABASE_URL\n');
  });

  it('--json usage errors are one JSON line', async () => {
    const i = io();
    expect(await run(['--json', 'purge', '--batch-size', 'x'], i.value)).toBe(2);
    const lines = i.err.join('').trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? '')).toMatchObject({
      error: { code: 'INVALID_ARGUMENT', exitCode: 2 },
    });
  });

  it('--help and --version are exit 0 on stdout', async () => {
    const h = io();
    expect(await run(['--help'], h.value)).toBe(0);
    expect(h.out.join('')).toContain('Exit codes:');
    const v = io();
    expect(await run(['-V'], v.value)).toBe(0);
    expect(v.out.join('')).toMatch(/^\d+\.\d+\.\d+\n$/);
  });
});
