/** A stream the CLI writes to: `process.stdout`, or a test's collector. */
export interface OutputLike {
  write(chunk: string | Uint8Array): unknown;
  /** True on a terminal: `purge` then draws a progress bar instead of plain lines. */
  readonly isTTY?: boolean | undefined;
  /** Terminal width in characters. */
  readonly columns?: number | undefined;
}

/** Everything `run` touches outside itself, injected so tests run commands in-process. */
export interface CliIo {
  /** Results: tables, JSON documents, message bodies. */
  readonly stdout: OutputLike;
  /** Errors, warnings and progress. */
  readonly stderr: OutputLike;
  /** Where `DATABASE_URL` is read from. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Aborting stops `purge` between batches (bin.ts wires it to SIGINT and SIGTERM). */
  readonly signal?: AbortSignal | undefined;
}
