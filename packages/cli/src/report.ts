/**
 * What a command produced: `data` is printed as JSON under `--json`, `text` otherwise. Commands
 * build both so every command has a machine form with the same content.
 */
export interface Report {
  readonly data: unknown;
  readonly text: string;
  /** Where `text` goes. stderr when stdout already carries the command's payload. @default 'stdout' */
  readonly stream?: 'stdout' | 'stderr';
}
