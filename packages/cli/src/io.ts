/** A stream the CLI writes to: `process.stdout`, or a test's collector. */
export interface OutputLike {
  /** Writes text or bytes as they are; the CLI adds its own newlines and ignores what this returns. */
  write(chunk: string | Uint8Array): unknown;
  /** True on a terminal: `purge` then draws a progress bar instead of plain lines. */
  readonly isTTY?: boolean | undefined;
  /** Terminal width in characters. */
  readonly columns?: number | undefined;
}

/** Where `forget` reads its confirmation: `process.stdin`, or a test's stream. */
export interface InputLike extends NodeJS.ReadableStream {
  /** Only on a terminal does the CLI ask; elsewhere it needs `--yes`. */
  readonly isTTY?: boolean | undefined;
}

/** Everything `run` touches outside itself, injected so tests run commands in-process. */
export interface CliIo {
  /** Results: tables, JSON documents, message bodies. */
  readonly stdout: OutputLike;
  /** Errors, warnings and progress. */
  readonly stderr: OutputLike;
  /** Where `DATABASE_URL` is read from. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /**
   * Aborting stops `purge` and `forget --since` between batches (bin.ts wires it to SIGINT and
   * SIGTERM, with the signal's name as the reason: the exit code is 130 or 143).
   */
  readonly signal?: AbortSignal | undefined;
  /** Answers to confirmations. @default none: commands that ask need `--yes` */
  readonly stdin?: InputLike | undefined;
}
