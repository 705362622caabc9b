import { ErrorCode, OnceError } from '@once/core';
import { AdminError, classifyDbError } from '@once/core/admin';
import { cliErrorOf } from './admin-exit.js';
import { CliError } from './cli-error.js';
import { reason } from './database.js';
import { ExitCode } from './exit-codes.js';

/** How a failed command is reported: the exit code, a stable code for `--json`, one line for people. */
export interface ExitReport {
  readonly exitCode: ExitCode;
  readonly code: string;
  readonly message: string;
}

/**
 * The one place errors become exit codes. The CLI's own errors carry theirs; core's admin
 * refusals are worded by `cliErrorOf`; core's other errors map
 * by code (bad identifier → usage, schema missing or too new → 4); a connection lost mid-command
 * is 3; anything else is a runtime failure.
 */
export function exitOf(err: unknown): ExitReport {
  if (err instanceof CliError) return { exitCode: err.exitCode, code: err.code, message: err.message };
  // Core's admin refusals, worded for the command line.
  if (AdminError.is(err)) return exitOf(cliErrorOf(err));
  if (OnceError.is(err)) {
    switch (err.code) {
      case ErrorCode.InvalidIdentifier:
      case ErrorCode.InvalidOption:
        return { exitCode: ExitCode.Usage, code: err.code, message: err.message };
      case ErrorCode.SchemaNotInstalled:
      case ErrorCode.SchemaTooNew:
        return { exitCode: ExitCode.Schema, code: err.code, message: err.message };
    }
    return { exitCode: ExitCode.Failure, code: err.code, message: err.message };
  }
  if (classifyDbError(err) === 'connection') {
    return {
      exitCode: ExitCode.Unreachable,
      code: 'DATABASE_UNREACHABLE',
      message: `lost the database connection: ${reason(err)}`,
    };
  }
  return { exitCode: ExitCode.Failure, code: 'FAILURE', message: reason(err) };
}
