import { ErrorCode, OnceError } from '@once/core';
import { describe, expect, it } from 'vitest';
import { CliError } from '../../src/cli-error.js';
import { ExitCode } from '../../src/exit-codes.js';
import { exitOf } from '../../src/exit-of.js';

describe('exitOf', () => {
  it('a CliError carries its own code', () => {
    expect(exitOf(new CliError(ExitCode.NotFound, 'UNKNOWN_CONSUMER', 'x'))).toEqual({
      exitCode: 5,
      code: 'UNKNOWN_CONSUMER',
      message: 'x',
    });
  });

  it.each([
    [ErrorCode.InvalidIdentifier, ExitCode.Usage],
    [ErrorCode.InvalidOption, ExitCode.Usage],
    [ErrorCode.SchemaNotInstalled, ExitCode.Schema],
    [ErrorCode.SchemaTooNew, ExitCode.Schema],
    [ErrorCode.Database, ExitCode.Failure],
  ])('core %s → %i', (code, exit) => {
    expect(exitOf(new OnceError(code, 'm')).exitCode).toBe(exit);
  });

  it('a connection lost mid-command is 3; any other error is 1 with its message', () => {
    const lost = Object.assign(new Error('Connection terminated unexpectedly'), {});
    expect(exitOf(lost)).toMatchObject({ exitCode: 3, code: 'DATABASE_UNREACHABLE' });
    expect(exitOf(Object.assign(new Error('terminating connection'), { code: '57P01' })).exitCode).toBe(3);
    expect(exitOf(Object.assign(new Error('syntax'), { code: '42601' }))).toEqual({
      exitCode: 1,
      code: 'FAILURE',
      message: 'syntax (42601)',
    });
    expect(exitOf('weird').message).toBe('weird');
  });

  it('an AggregateError with no message (a refused dual-stack connect) reports its first cause', () => {
    const agg = new AggregateError(
      [Object.assign(new Error('connect ECONNREFUSED ::1:1'), { code: 'ECONNREFUSED' })],
      '',
    );
    expect(exitOf(agg).message).toBe('connect ECONNREFUSED ::1:1');
  });
});
