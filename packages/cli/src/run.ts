import { type Command, CommanderError } from 'commander';
import { CliError } from './cli-error.js';
import { type Database, openDatabase } from './database.js';
import { ALL_DATABASES_COMMANDS, type NamedUrl, pickDatabases, readDatabasesFile } from './databases-file.js';
import { escapeLines, escapeText } from './escape-text.js';
import { ExitCode } from './exit-codes.js';
import { exitOf } from './exit-of.js';
import { interruptedExit } from './interrupted.js';
import type { CliIo } from './io.js';
import { jsonText } from './json-text.js';
import { buildProgram, type Execute, type GlobalOptions } from './program.js';
import { type Redactor, secretRedactor } from './redact-secrets.js';
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
    const targets = chooseDatabases(command, globals, io, redact);
    if (targets === undefined) {
      const report = await runOn(openOne(globals, io), body, globals);
      print(io, json, report, redact);
      exitCode = report.exitCode ?? ExitCode.Ok;
      return;
    }
    if (targets.all) {
      exitCode = await runOnEach(targets.databases, body, globals, io, json, redact);
      return;
    }
    const [one] = targets.databases;
    const report = await runOn(openNamed(one!, globals), body, globals);
    print(io, json, report, redact);
    exitCode = report.exitCode ?? ExitCode.Ok;
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

type Body = Parameters<Execute>[1];

/** Runs `body` on the database once it is open, and ends its pool whatever happens. */
async function runOn(opening: Promise<Database>, body: Body, globals: GlobalOptions): Promise<Report> {
  const db = await opening;
  try {
    return await body(db, globals);
  } finally {
    await db.pool.end().catch(() => {});
  }
}

/** The database of `--database-url` or `DATABASE_URL`, as without a databases file. */
function openOne(globals: GlobalOptions, io: CliIo): Promise<Database> {
  const url = globals.databaseUrl ?? io.env.DATABASE_URL;
  if (!url) {
    throw new CliError(
      ExitCode.Usage,
      'NO_DATABASE_URL',
      'no database: pass --database-url <url> or set DATABASE_URL',
    );
  }
  return openDatabase({
    url,
    schema: globals.schema,
    urlSource: globals.databaseUrl === undefined ? 'DATABASE_URL' : '--database-url',
  });
}

function openNamed(database: NamedUrl, globals: GlobalOptions): Promise<Database> {
  return openDatabase({ url: database.url, schema: globals.schema, urlSource: `databases.${database.name}` });
}

/**
 * The databases `--database` picks from the databases file (`--databases` or `ONCE_DATABASES`);
 * undefined without `--database`, when the command runs on `--database-url` or `DATABASE_URL` as
 * it always has (the file is not read then: a broken one does not stop a command that does not
 * use it). The file's URLs go to the redactor as soon as it parses.
 */
function chooseDatabases(
  command: Command,
  globals: GlobalOptions,
  io: CliIo,
  redact: Redactor,
): { all: boolean; databases: NamedUrl[] } | undefined {
  if (globals.database === undefined) {
    if (globals.databases === undefined) return undefined;
    throw new CliError(
      ExitCode.Usage,
      'NO_DATABASE_CHOSEN',
      `--databases needs --database <name>, or --database all (${ALL_DATABASES_COMMANDS.join(', ')})`,
    );
  }
  if (globals.databaseUrl !== undefined) {
    throw new CliError(
      ExitCode.Usage,
      'CONFLICTING_OPTIONS',
      '--database picks a database of the databases file; --database-url names one itself: pass one of them',
    );
  }
  const path = globals.databases ?? io.env.ONCE_DATABASES;
  if (!path) {
    throw new CliError(
      ExitCode.Usage,
      'NO_DATABASES_FILE',
      '--database needs a databases file: pass --databases <file> or set ONCE_DATABASES',
    );
  }
  const all = globals.database === 'all';
  const name = commandName(command);
  if (all && !ALL_DATABASES_COMMANDS.includes(name)) {
    throw new CliError(
      ExitCode.Usage,
      'DATABASE_ALL_REFUSED',
      `--database all works with ${ALL_DATABASES_COMMANDS.join(', ')}; ${name} works on one database: pass --database <name>`,
    );
  }
  const source = globals.databases === undefined ? 'ONCE_DATABASES' : '--databases';
  const databases = readDatabasesFile(path, source, redact.add);
  return { all, databases: pickDatabases(databases, globals.database) };
}

/** The command as typed after `once`: `migrate`, `outbox status`. */
function commandName(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/**
 * `--database all`: the command on each database in turn, one pool open at a time; one failing
 * (unreachable, a schema too new) does not stop the others. Each prints its section: a heading
 * with the name, then its report or its error (`--json`: one object keyed by database name, an
 * error as `{ "error": { code, exitCode, message } }`). The exit code is the highest of theirs.
 * An interrupt (Ctrl-C) stops the command and leaves the databases after it out.
 */
async function runOnEach(
  databases: readonly NamedUrl[],
  body: Body,
  globals: GlobalOptions,
  io: CliIo,
  json: boolean,
  redact: Redactor,
): Promise<ExitCode> {
  // Entries, not assignments: a database may be named `__proto__`.
  const data: [string, unknown][] = [];
  const sections: string[] = [];
  let worst: ExitCode = ExitCode.Ok;
  for (const database of databases) {
    const stopped = interruptedExit(io.signal);
    if (stopped !== undefined) {
      // The databases not reached are left out; the exit code says the run is not whole.
      if (stopped > worst) worst = stopped;
      break;
    }
    let code: ExitCode;
    try {
      const report = await runOn(openNamed(database, globals), body, globals);
      data.push([database.name, report.data]);
      sections.push(`database ${database.name}\n${report.text}`);
      code = report.exitCode ?? ExitCode.Ok;
    } catch (err) {
      const report = exitOf(err);
      const error = { code: report.code, exitCode: report.exitCode, message: redact(report.message) };
      data.push([database.name, { error }]);
      sections.push(`database ${database.name}\nerror: ${escapeText(error.message)} (${error.code})`);
      code = report.exitCode;
    }
    if (code > worst) worst = code;
  }
  print(io, json, { data: Object.fromEntries(data), text: sections.join('\n\n') }, redact);
  return worst;
}

function print(io: CliIo, json: boolean, report: Report, redact: Redactor): void {
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
