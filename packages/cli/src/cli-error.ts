import type { ExitCode } from './exit-codes.js';

/**
 * An error the CLI reports as one line and turns into an exit code. Commands throw it for
 * the cases they recognise (not found, usage); anything else is classified in `toExit`.
 */
export class CliError extends Error {
  /** The process exit code this error maps to. */
  readonly exitCode: ExitCode;
  /** A stable code for `--json` output, e.g. `NOT_FOUND`. */
  readonly code: string;

  constructor(exitCode: ExitCode, code: string, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CliError';
    this.exitCode = exitCode;
    this.code = code;
  }
}
