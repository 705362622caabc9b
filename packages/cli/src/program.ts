import { createRequire } from 'node:module';
import { Command, Option } from 'commander';
import {
  checkFailedRetryOptions,
  failedDiscardCommand,
  failedListCommand,
  failedRetryCommand,
} from './commands/failed.js';
import { checkForgetOptions, forgetCommand } from './commands/forget.js';
import { inspectCommand } from './commands/inspect.js';
import { migrateCommand } from './commands/migrate.js';
import { checkOutboxRetryOptions, outboxRetryCommand, outboxStatusCommand } from './commands/outbox.js';
import { purgeCommand } from './commands/purge.js';
import { statusCommand } from './commands/status.js';
import type { Database } from './database.js';
import { ALL_DATABASES_COMMANDS } from './databases-file.js';
import { escapeLines } from './escape-text.js';
import { EXIT_CODES_HELP } from './exit-codes.js';
import type { CliIo } from './io.js';
import { integerAtLeast } from './parse-args.js';
import { parseTime } from './parse-time.js';
import type { Report } from './report.js';

/** The options every command accepts, before or after its name. */
export interface GlobalOptions {
  /** @default the DATABASE_URL environment variable */
  readonly databaseUrl?: string;
  /** A JSON file of database name → URL. @default the ONCE_DATABASES environment variable */
  readonly databases?: string;
  /** Which database of the `databases` file: a name, or `all` (migrate, purge, status). */
  readonly database?: string;
  /** @default 'once' */
  readonly schema: string;
  /** @default false */
  readonly json?: boolean;
}

/**
 * Runs one command's body against the database; provided by `run`, which owns connecting,
 * printing and exit codes. `check` runs first, before any connection.
 */
export type Execute = (
  command: Command,
  body: (db: Database, globals: GlobalOptions) => Promise<Report>,
  check?: (globals: GlobalOptions) => void,
) => Promise<void>;

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

/**
 * The `once` command tree. Built afresh per run (commander keeps parse state on the objects).
 * Output and exits go through `io` and exceptions, never `process`. Commander's own text echoes
 * arguments as typed, so it passes through `redact` (a password in a mistyped option) and is
 * escaped (a control character in an argument).
 */
export function buildProgram(
  io: CliIo,
  execute: Execute,
  quietErrors: () => boolean,
  redact: (text: string) => string = (text) => text,
): Command {
  const program = new Command('once')
    .description('Operate once: the effectively-once inbox and outbox in PostgreSQL')
    .version(version, '-V, --version')
    .addOption(
      new Option('--database-url <url>', 'PostgreSQL URL (default: the DATABASE_URL environment variable)'),
    )
    .addOption(
      new Option(
        '--databases <file>',
        'JSON file of named databases, {"<name>": "<postgres url>", ...} (default: the ONCE_DATABASES environment variable)',
      ),
    )
    .addOption(
      new Option(
        '--database <name>',
        `a database of the --databases file, or all (${ALL_DATABASES_COMMANDS.join(', ')}: each in turn)`,
      ),
    )
    .option('--schema <name>', "once's schema (lower-case letters, digits, _)", 'once')
    .option('--json', 'print machine-readable JSON (errors too, on stderr)')
    .exitOverride()
    // Every subcommand's --help lists these too: they are accepted after the command's name.
    .configureHelp({ showGlobalOptions: true })
    .configureOutput({
      writeOut: (s) => io.stdout.write(escapeLines(redact(s))),
      // Under --json, commander's own words (errors, the help a missing subcommand shows) give
      // way to the one JSON line `run` writes.
      writeErr: (s) => {
        if (!quietErrors()) io.stderr.write(escapeLines(redact(s)));
      },
    })
    .showSuggestionAfterError()
    .addHelpText('afterAll', EXIT_CODES_HELP);

  program
    .command('migrate')
    .description('install or upgrade the schema (idempotent; safe with consumers running)')
    .action(async (_o, cmd: Command) => execute(cmd, (db) => migrateCommand(db)));

  program
    .command('status')
    .description('schema version, inbox rows per consumer, outbox by status')
    .action(async (_o, cmd: Command) => execute(cmd, (db) => statusCommand(db)));

  program
    .command('inspect')
    .description('show one inbox row: status, fingerprint, result, error, attempts, body')
    .argument('<consumer>', 'consumer name')
    .argument('<id>', 'message id')
    .option('--body-bytes <n>', 'bytes of the body to preview', integerAtLeast(0), 200)
    .action(async (consumer: string, id: string, o: { bodyBytes: number }, cmd: Command) =>
      execute(cmd, (db) => inspectCommand(db, consumer, id, { bodyBytes: o.bodyBytes })),
    );

  const failed = program.command('failed').description('parked failures: list, retry, discard');
  failed
    .command('list')
    .description('list failed messages, oldest first per consumer')
    .option('--consumer <name>', 'only this consumer')
    .option('--limit <n>', 'at most this many rows', integerAtLeast(1), 100)
    .action(async (o: { consumer?: string; limit: number }, cmd: Command) =>
      execute(cmd, (db) => failedListCommand(db, { consumer: o.consumer, limit: o.limit })),
    );
  failed
    .command('retry')
    .description(
      'save the stored body and delete the failed record, so the next delivery is processed afresh',
    )
    .argument('<consumer>', 'consumer name')
    .argument('<id>', 'message id')
    .option('--out <file>', 'write the stored body to this file (- for stdout; default: stdout)')
    .option(
      '--republish',
      'also enqueue the body in the outbox under its own message id, in the same transaction; a relay sends it',
    )
    .option(
      '--to <destination>',
      "with --republish: the outbox destination (default: the Kafka topic, SQS queue or NATS subject it came from); '' with --key <queue>: RabbitMQ's default exchange (outbox destination amq.default)",
    )
    .option('--key <key>', 'with --republish: the key to publish with (default: the key it came with)')
    .option('--forget-steps', "lease mode: delete the message's recorded steps too (their effects run again)")
    .addHelpText(
      'after',
      '\nWith --republish the message goes back through your outbox: the failed record is deleted and\n' +
        'the body enqueued in one transaction, under the original message id, so a redelivery of the\n' +
        'original and the republished copy are one message to the consumer. Your relay must have a\n' +
        'publisher for the destination. A broker that drops a repeated id for a while (JetStream,\n' +
        'SQS FIFO) does not drop it: the output says how (see docs/outbox.md).',
    )
    .action(
      async (
        consumer: string,
        id: string,
        o: { out?: string; republish?: boolean; to?: string; key?: string; forgetSteps?: boolean },
        cmd: Command,
      ) =>
        execute(
          cmd,
          (db, g) => failedRetryCommand(db, io, g.json === true, consumer, id, o),
          (g) => checkFailedRetryOptions(o, g.json === true),
        ),
    );
  failed
    .command('discard')
    .description('give up a failed message: later deliveries are acked as duplicates')
    .argument('<consumer>', 'consumer name')
    .argument('<id>', 'message id')
    .action(async (consumer: string, id: string, _o, cmd: Command) =>
      execute(cmd, (db) => failedDiscardCommand(db, consumer, id)),
    );

  program
    .command('forget')
    .description('forget processed (done) ids so their next delivery runs the handler again, after a bug fix')
    .argument('<consumer>', 'consumer name')
    .argument('[id]', 'one message id (or --since for a range)')
    .option(
      '--since <time>',
      'every id the consumer processed from this time: ISO 8601, or ago (90m, 2h, 1d)',
      parseTime(),
    )
    .option('--until <time>', 'with --since: only ids processed before this time (default: now)', parseTime())
    .option('--forget-steps', 'lease mode: forget ids with recorded steps too (their effects run again)')
    .option('-y, --yes', 'do not ask for confirmation (required without a terminal)')
    .option('--batch-size <n>', 'with --since: rows per DELETE', integerAtLeast(1), 1000)
    .addHelpText(
      'after',
      '\nOnly done rows are forgotten. Failed rows stay (`once failed retry` is for those), rows in\n' +
        'progress stay (a lease-mode worker holds them), and rows with recorded steps stay unless\n' +
        '--forget-steps. Nothing is sent: an id runs again when the broker delivers it again (replay\n' +
        'the topic or queue). Safe with consumers running. Asks first on a terminal; --yes otherwise.',
    )
    .action(
      async (
        consumer: string,
        id: string | undefined,
        o: { since?: Date; until?: Date; forgetSteps?: boolean; yes?: boolean; batchSize: number },
        cmd: Command,
      ) =>
        execute(
          cmd,
          (db, g) => forgetCommand(db, io, g.json === true, consumer, id, o),
          () => checkForgetOptions(id, o),
        ),
    );

  program
    .command('purge')
    .description('delete expired inbox rows in small batches')
    .option('--batch-size <n>', 'rows per DELETE', integerAtLeast(1), 5000)
    .option('--max-rows <n>', 'stop after this many rows', integerAtLeast(0))
    .option('--pause-ms <ms>', 'pause between batches, in ms', integerAtLeast(0), 0)
    .option(
      '--rows-per-second <n>',
      'delete at most this many rows per second on average, so a backlog drains without starving the database',
      integerAtLeast(1),
    )
    .action(
      async (
        o: { batchSize: number; maxRows?: number; pauseMs: number; rowsPerSecond?: number },
        cmd: Command,
      ) =>
        execute(cmd, (db, g) =>
          purgeCommand(db, io, g.json === true, {
            batchSize: o.batchSize,
            maxRows: o.maxRows,
            pauseMs: o.pauseMs,
            rowsPerSecond: o.rowsPerSecond,
          }),
        ),
    );

  const outbox = program.command('outbox').description('the transactional outbox: status, retry');
  outbox
    .command('status')
    .description('pending, sent and failed rows per destination; oldest pending')
    .action(async (_o, cmd: Command) => execute(cmd, (db) => outboxStatusCommand(db)));
  outbox
    .command('retry')
    .description('put failed rows back to pending (attempts 0, due now)')
    .option(
      '--id <message-id>',
      'one message, by its outbox message id (the row UUID, or the id it was enqueued with)',
    )
    .option('--all-failed', 'every failed message')
    .action(async (o: { id?: string; allFailed?: boolean }, cmd: Command) => {
      const options = { id: o.id, allFailed: o.allFailed };
      await execute(
        cmd,
        (db) => outboxRetryCommand(db, options),
        () => checkOutboxRetryOptions(options),
      );
    });

  return program;
}
