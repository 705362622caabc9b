import {
  AdminError,
  AdminErrorCode,
  countForgetRange,
  forgetMessage,
  forgetRange,
  getInboxRow,
  readSteps,
} from '@once/core/admin';
import { CliError } from '../cli-error.js';
import { confirm } from '../confirm.js';
import { type Database, requireSchema } from '../database.js';
import { ExitCode } from '../exit-codes.js';
import { formatTime } from '../format.js';
import { interruptedExit } from '../interrupted.js';
import type { CliIo } from '../io.js';
import { quote } from '../json-text.js';
import { createProgress } from '../progress.js';
import type { Report } from '../report.js';

/** Options of `once forget`. */
export interface ForgetCommandOptions {
  /** Every id the consumer processed at or after this time, instead of one id. */
  readonly since?: Date | undefined;
  /** With `since`: only ids processed before this time. @default now */
  readonly until?: Date | undefined;
  /** Lease mode: forget ids with recorded steps too (their effects run again). @default false */
  readonly forgetSteps?: boolean | undefined;
  /** Do not ask. Required when there is no terminal to ask on. @default false */
  readonly yes?: boolean | undefined;
  /** With `since`: rows deleted per statement. @default 1000 */
  readonly batchSize: number;
}

/** Refuses what `forget` cannot do, before the database is touched. */
export function checkForgetOptions(id: string | undefined, options: ForgetCommandOptions): void {
  if ((id === undefined) === (options.since === undefined)) {
    throw new CliError(ExitCode.Usage, 'USAGE', 'pass exactly one of <id> and --since <time>');
  }
  if (options.until !== undefined && options.since === undefined) {
    throw new CliError(ExitCode.Usage, 'USAGE', '--until only applies with --since');
  }
  if (options.since !== undefined && options.until !== undefined && options.until <= options.since) {
    throw new CliError(ExitCode.Usage, 'USAGE', '--until must be later than --since');
  }
}

/**
 * `once forget <consumer> <id>` or `once forget <consumer> --since <time>`: deletes `done` inbox
 * rows so the next delivery of each id runs the handler again (after a bug fix). Failed rows are
 * `failed retry`'s; rows in progress (lease mode) belong to a running worker; rows with recorded
 * steps need --forget-steps. Asks first on a terminal; --yes otherwise.
 */
export async function forgetCommand(
  db: Database,
  io: CliIo,
  json: boolean,
  consumer: string,
  id: string | undefined,
  options: ForgetCommandOptions,
): Promise<Report> {
  await requireSchema(db);
  if (id !== undefined) return forgetOne(db, io, consumer, id, options);
  return forgetSince(db, io, json, consumer, options.since as Date, options);
}

async function forgetOne(
  db: Database,
  io: CliIo,
  consumer: string,
  id: string,
  options: ForgetCommandOptions,
): Promise<Report> {
  const key = { consumer, messageId: id };
  // Refusals come before the question: unknown (exit 5), not done (5), steps (2).
  const row = await getInboxRow(db.pool, db.schema, key);
  if (row.status !== 'done') {
    throw new AdminError(db.schema, { code: AdminErrorCode.NotDone, ...key, status: row.status });
  }
  const steps = await readSteps(db.pool, db.schema, key);
  if (steps.length > 0 && options.forgetSteps !== true) {
    throw new AdminError(db.schema, {
      code: AdminErrorCode.HasSteps,
      ...key,
      steps: steps.map((s) => s.step),
    });
  }
  await ask(
    io,
    `Forget message ${quote(id)} of consumer ${quote(consumer)} (processed ${formatTime(row.createdAt)})? ` +
      'Its next delivery runs the handler again.',
    options.yes === true,
  );
  // Core decides again in the statement that deletes: the row may have changed since.
  const result = await forgetMessage(db.pool, db.schema, key, { forgetSteps: options.forgetSteps });
  const stepsNote = result.steps > 0 ? ` and its ${plural(result.steps, 'recorded step')}` : '';
  return {
    data: { schema: db.schema, consumer, messageId: id, removed: result.removed, steps: result.steps },
    text: `forgot ${quote(id)} (consumer ${quote(consumer)})${stepsNote}: its next delivery is processed afresh`,
  };
}

async function forgetSince(
  db: Database,
  io: CliIo,
  json: boolean,
  consumer: string,
  since: Date,
  options: ForgetCommandOptions,
): Promise<Report> {
  // A consumer without rows has nothing in the range: forgot 0 (exit 0), like a range that holds
  // none of its rows. So a second run of the same command, after the first took the consumer's
  // last rows, reports 0 instead of failing; the text still says the consumer has no rows, for a
  // mistyped name.
  const count = await countForgetRange(db.pool, db.schema, { consumer, since, until: options.until }).catch(
    (err: unknown) => {
      if (err instanceof AdminError && err.detail.code === AdminErrorCode.UnknownConsumer) return undefined;
      throw err;
    },
  );
  if (count === undefined) return forgotNothing(db, consumer, since, options.until);
  // The upper bound is fixed now: ids processed after the question are never taken.
  const until = options.until ?? count.asOf;
  const forgetSteps = options.forgetSteps === true;
  const planned = count.done + (forgetSteps ? count.doneWithSteps : 0);
  const kept = {
    failed: count.failed,
    inProgress: count.inProgress,
    withSteps: forgetSteps ? 0 : count.doneWithSteps,
  };
  const range = `processed from ${formatTime(since)} to ${formatTime(until)}`;
  let removed = 0;
  let steps = 0;
  let exitCode: ExitCode | undefined;
  if (planned > 0) {
    await ask(
      io,
      `Forget ${plural(planned, 'processed id')} of consumer ${quote(consumer)} ${range}? ` +
        'Their next deliveries run the handler again.',
      options.yes === true,
    );
    const progress = json
      ? undefined
      : createProgress(io.stderr, { unit: 'ids', verb: 'forgot', total: planned });
    try {
      const r = await forgetRange(
        db.pool,
        db.schema,
        { consumer, since, until },
        {
          forgetSteps,
          batchSize: options.batchSize,
          signal: io.signal,
          onProgress: (n) => {
            removed = n;
            progress?.update(n);
          },
        },
      );
      removed = r.removed;
      steps = r.steps;
      if (r.stopped) exitCode = interruptedExit(io.signal);
    } finally {
      progress?.finish(removed);
    }
  }
  const keptText = [
    kept.failed > 0 ? `${kept.failed} failed (see \`once failed list\`)` : '',
    kept.inProgress > 0 ? `${kept.inProgress} in progress (lease mode)` : '',
    kept.withSteps > 0 ? `${kept.withSteps} with recorded steps (pass --forget-steps)` : '',
  ].filter(Boolean);
  return {
    data: {
      schema: db.schema,
      consumer,
      since,
      until,
      removed,
      steps,
      kept,
      stopped: exitCode !== undefined,
    },
    text:
      `${exitCode === undefined ? '' : 'stopped: '}forgot ${plural(removed, 'processed id')} of consumer ${quote(consumer)} ${range}` +
      `${steps > 0 ? ` (and ${plural(steps, 'recorded step')})` : ''}` +
      `${removed > 0 ? ': their next deliveries are processed afresh' : ''}` +
      `${keptText.length > 0 ? `. Kept: ${keptText.join(', ')}` : ''}`,
    ...(exitCode === undefined ? {} : { exitCode }),
  };
}

/** The report of `forget --since` for a consumer without any row in the schema. */
function forgotNothing(db: Database, consumer: string, since: Date, until: Date | undefined): Report {
  // Nothing was read, so the end of the range is --until, or this machine's clock.
  const end = until ?? new Date();
  return {
    data: {
      schema: db.schema,
      consumer,
      since,
      until: end,
      removed: 0,
      steps: 0,
      kept: { failed: 0, inProgress: 0, withSteps: 0 },
      stopped: false,
    },
    text:
      `forgot 0 processed ids of consumer ${quote(consumer)} processed from ${formatTime(since)} to ${formatTime(end)}. ` +
      `It has no rows in schema ${db.schema} (see \`once status\` for the consumers there are)`,
  };
}

/** Asks, and turns a no into an error that says nothing changed (exit 1; 130 for Ctrl-C at the prompt). */
async function ask(io: CliIo, question: string, yes: boolean): Promise<void> {
  if (await confirm(io, question, yes)) return;
  const interrupted = interruptedExit(io.signal);
  // Ctrl-C left the cursor after the question.
  if (interrupted !== undefined) io.stderr.write('\n');
  throw new CliError(
    interrupted ?? ExitCode.Failure,
    'NOT_CONFIRMED',
    'not confirmed: nothing was forgotten',
  );
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
