import type { ExitCode } from './exit-codes.js';

/**
 * What a command produced: `data` is printed as JSON under `--json`, `text` otherwise. Commands
 * build both so every command has a machine form with the same content.
 */
export interface Report {
  readonly data: unknown;
  readonly text: string;
  /** Where `text` goes. stderr when stdout already carries the command's payload. @default 'stdout' */
  readonly stream?: 'stdout' | 'stderr';
  /** The exit code when the command ended early but reported what it did (interrupted: 130). @default 0 */
  readonly exitCode?: ExitCode;
}
