import { CommanderError } from 'commander';
import { CliError } from './cli-error.js';
import { openDatabase } from './database.js';
import { escapeLines, escapeText } from './escape-text.js';
import { ExitCode } from './exit-codes.js';
import { exitOf } from './exit-of.js';
import type { CliIo } from './io.js';
import { jsonText } from './json-text.js';
import { buildProgram, type Execute, type GlobalOptions } from './program.js';
import { secretRedactor } from './redact-secrets.js';
import type { Report } from './report.js';

/**
 * Runs the `once` command line `argv` (without `node` and the script) and resolves to the exit
 * code; never calls `process.exit` and never throws. Everything it prints goes through `io`, so
 * tests run commands in-process; `bin.ts` passes the real process streams.
 *
 * What it prints holds no control character but the newline (text: JSON's escapes, as `\u001b`;
 * `--json`: `\u` escapes for DEL and C1 too) and no password of the database URL, even where
 * the argument parser echoes an argument.
 */
export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  // Known before parsing succeeds, so even a usage error is reported as JSON under --json.
  let json = argv.includes('--json');
  const redact = secretRedactor(argv, io.env);
  let exitCode: ExitCode = ExitCode.Ok;
  const execute: Execute = async (command, body, check) => {
    const globals = command.optsWithGlobals<GlobalOptions>();
    json = globals.json === true;
    check?.(globals);
    const url = globals.databaseUrl ?? io.env.DATABASE_URL;
    if (!url) {
      throw new CliError(
        ExitCode.Usage,
        'NO_DATABASE_URL',
        'no database: pass --database-url <url> or set DATABASE_URL',
      );
    }
    const db = await openDatabase({
      url,
      schema: globals.schema,
      urlSource: globals.databaseUrl === undefined ? 'DATABASE_URL' : '--database-url',
    });
    try {
      const report = await body(db, globals);
      print(io, json, report, redact);
      exitCode = report.exitCode ?? ExitCode.Ok;
    } finally {
      await db.pool.end().catch(() => {});
    }
  };
  const program = buildProgram(io, execute, () => json, redact);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (err) {
    if (err instanceof CommanderError) return commanderExit(io, json, err, redact);
    const report = exitOf(err);
    const error = { code: report.code, exitCode: report.exitCode, message: redact(report.message) };
    // One line, whatever the message quotes (a database error may quote a value).
    io.stderr.write(json ? `${jsonText({ error })}\n` : `once: ${escapeText(error.message)}\n`);
    return report.exitCode;
  }
}

function print(io: CliIo, json: boolean, report: Report, redact: (text: string) => string): void {
  if (json) io.stdout.write(`${redact(jsonText(report.data, 2))}\n`);
  else {
    // Commands escape each value they print; this is the guard for one that did not.
    const text = escapeLines(redact(report.text));
    (report.stream === 'stderr' ? io.stderr : io.stdout).write(`${text}\n`);
  }
}

/** Commander's usage errors by its code, as the CLI's own codes: scripts see one vocabulary. */
const USAGE_CODES: Readonly<Record<string, string>> = Object.freeze({
  'commander.unknownOption': 'UNKNOWN_OPTION',
  'commander.unknownCommand': 'UNKNOWN_COMMAND',
  'commander.missingArgument': 'MISSING_ARGUMENT',
  'commander.excessArguments': 'EXCESS_ARGUMENTS',
  'commander.optionMissingArgument': 'MISSING_OPTION_VALUE',
  'commander.missingMandatoryOptionValue': 'MISSING_OPTION_VALUE',
  'commander.invalidArgument': 'INVALID_ARGUMENT',
  'commander.conflictingOption': 'CONFLICTING_OPTIONS',
  'commander.help': 'MISSING_SUBCOMMAND',
});

/**
 * Help and version are exit 0. Commander has already printed its message (unless --json), and
 * `commander.help` is help shown because a subcommand was missing: a usage error like the rest.
 * Under --json the error carries the CLI's own code, never commander's.
 */
function commanderExit(
  io: CliIo,
  json: boolean,
  err: CommanderError,
  redact: (text: string) => string,
): number {
  if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return ExitCode.Ok;
  if (json) {
    const message =
      err.code === 'commander.help' ? 'a subcommand is missing' : redact(err.message.replace(/^error: /, ''));
    const code = USAGE_CODES[err.code] ?? 'USAGE';
    io.stderr.write(`${jsonText({ error: { code, exitCode: ExitCode.Usage, message } })}\n`);
  }
  return ExitCode.Usage;
}
