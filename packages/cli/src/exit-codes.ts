/** The exit codes of `once`; scripts may rely on them. */
export const ExitCode = {
  /** The command did what it was asked. */
  Ok: 0,
  /** A runtime failure: a query failed, a file could not be written. */
  Failure: 1,
  /** A usage error: unknown command or flag, a bad value, a missing argument, a request that cannot be done as asked. */
  Usage: 2,
  /** The database is unreachable: connection refused, authentication failed, unknown database. */
  Unreachable: 3,
  /** once's schema is not installed, is older than this build needs, or is newer and removed something it uses. */
  Schema: 4,
  /** Not found: an unknown consumer, message id or outbox id, or no failed record for it. */
  NotFound: 5,
  /** Stopped by Ctrl-C (SIGINT) between batches; what was done so far is reported. 128 + 2, as shells do. */
  Interrupted: 130,
  /** Stopped by SIGTERM between batches. 128 + 15. */
  Terminated: 143,
} as const;
/** One of {@link (ExitCode:variable)}'s values. */
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** The exit-code table shown at the end of every `--help`. */
export const EXIT_CODES_HELP = `
Exit codes:
  0  ok
  1  runtime failure
  2  usage error (bad command, flag or value; a request that cannot be done as asked)
  3  database unreachable (connection refused, authentication, unknown database)
  4  schema not installed, older than needed (run \`once migrate\`) or too new
  5  not found (unknown consumer, message id or outbox id; no failed or done record)
  130  interrupted by Ctrl-C (purge, forget --since: stopped between batches)
  143  stopped by SIGTERM (as 130)`;
