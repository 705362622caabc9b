import { writeFile } from 'node:fs/promises';
import { fromJsonb, toJsonb } from '@once/core/adapter';
import { CliError } from '../cli-error.js';
import { type Database, requireSchema } from '../database.js';
import { ExitCode } from '../exit-codes.js';
import { formatBytes, formatTable, formatTime } from '../format.js';
import type { CliIo } from '../io.js';
import type { Report } from '../report.js';
import { outboxChannelOf } from '../sql.js';
import { errorLine } from './inspect.js';
import { findInboxRow, notFailed, readSteps, requireConsumer } from './lookup.js';

interface FailedRow {
  consumer: string;
  message_id: string;
  attempts: number;
  error: unknown;
  created_at: Date;
  expires_at: Date;
  body_bytes: number | null;
  body_truncated: boolean;
}

/** The row to retry is missing (status undefined) or not failed. */
class NotFailed extends Error {
  constructor(readonly status: string | undefined) {
    super('not failed');
  }
}

/** Options of `once failed list`. */
export interface FailedListOptions {
  /** Only this consumer's failures; an unknown consumer is exit 5. @default all consumers */
  readonly consumer?: string | undefined;
  /** At most this many rows. @default 100 */
  readonly limit: number;
}

/** `once failed list`: parked failures, oldest first per consumer. */
export async function failedListCommand(db: Database, options: FailedListOptions): Promise<Report> {
  await requireSchema(db);
  const consumer = options.consumer ?? null;
  if (consumer !== null) await requireConsumer(db, consumer);
  const rows = (await db.pool.query<FailedRow>(db.sql.failedList, [consumer, options.limit])).rows;
  const total = (await db.pool.query<{ n: number }>(db.sql.failedCount, [consumer])).rows[0]?.n ?? 0;
  const data = {
    schema: db.schema,
    total,
    failed: rows.map((r) => ({
      consumer: r.consumer,
      messageId: r.message_id,
      attempts: r.attempts,
      error: fromJsonb(r.error),
      failedAt: r.created_at,
      expiresAt: r.expires_at,
      bodyBytes: r.body_bytes,
      bodyTruncated: r.body_truncated,
    })),
  };
  if (rows.length === 0) return { data, text: 'no failed messages' };
  const table = formatTable(
    ['consumer', 'message id', 'attempts', 'failed at', 'body', 'error'],
    rows.map((r) => [
      r.consumer,
      r.message_id,
      String(r.attempts),
      formatTime(r.created_at),
      r.body_bytes === null ? '-' : `${formatBytes(r.body_bytes)}${r.body_truncated ? ' (cut)' : ''}`,
      errorLine(fromJsonb(r.error)),
    ]),
  );
  const more =
    total > rows.length ? `\nshowing ${rows.length} of ${total} failed; raise --limit to see more` : '';
  return { data, text: `${table}${more}` };
}

/** Options of `once failed retry`. */
export interface FailedRetryOptions {
  /** Write the stored body to this file; `-` is stdout. @default stdout, or only the JSON under --json */
  readonly out?: string | undefined;
  /**
   * Republish the stored body through the outbox, under the message's own id, in the transaction
   * that deletes the failed record: a relay with a publisher for the destination sends it.
   */
  readonly republish?: boolean | undefined;
  /** The outbox destination to republish to. @default the source it came from (Kafka topic, SQS queue URL) */
  readonly to?: string | undefined;
  /** The key to republish with (partition key, message group, routing key). @default the key it came with */
  readonly key?: string | undefined;
  /**
   * Lease mode: delete the record even though it has recorded steps, which go with it, so the
   * steps' effects run again on the next delivery. Without it such a retry is refused (exit 2).
   * @default false
   */
  readonly forgetSteps?: boolean | undefined;
}

/** Refuses what `failed retry` cannot do, before the database is touched. */
export function checkFailedRetryOptions(options: FailedRetryOptions, json: boolean): void {
  if (!options.republish && (options.to !== undefined || options.key !== undefined)) {
    throw new CliError(ExitCode.Usage, 'USAGE', '--to and --key only apply with --republish');
  }
  if (options.to !== undefined && options.to.length === 0) {
    throw new CliError(ExitCode.Usage, 'USAGE', '--to must name an outbox destination');
  }
  if (json && options.out === '-') {
    throw new CliError(
      ExitCode.Usage,
      'USAGE',
      '--out - cannot be combined with --json (the body is in the JSON as base64)',
    );
  }
}

/**
 * `once failed retry <consumer> <id>`: saves the stored body, then deletes the failed record in
 * the same transaction that locked it, so the next delivery of the id is processed afresh.
 * The body is written before the delete commits: a failed write leaves the record in place.
 */
export async function failedRetryCommand(
  db: Database,
  io: CliIo,
  json: boolean,
  consumer: string,
  id: string,
  options: FailedRetryOptions,
): Promise<Report> {
  await requireSchema(db);
  // Lease mode records each external effect as a step, and the steps go with the inbox row: a
  // fresh run would repeat effects that already happened. Only the operator may decide that.
  const steps = await readSteps(db, consumer, id);
  if (steps.length > 0 && options.forgetSteps !== true) {
    throw new CliError(
      ExitCode.Usage,
      'HAS_STEPS',
      `message ${JSON.stringify(id)} of consumer ${JSON.stringify(consumer)} has ${steps.length} recorded step${steps.length === 1 ? '' : 's'} ` +
        `(${steps.map((st) => st.step).join(', ')}); retrying deletes them and their effects run again. Nothing was changed. ` +
        'Pass --forget-steps to do it anyway',
    );
  }
  const client = await db.pool.connect();
  let broken: Error | undefined;
  let body: Buffer | null;
  let truncated: boolean;
  let republished: Republished | undefined;
  try {
    await client.query('BEGIN');
    const row = (
      await client.query<{
        status: string;
        body: Buffer | null;
        body_truncated: boolean;
        origin: Origin | null;
      }>(db.sql.lockRow, [consumer, id])
    ).rows[0];
    if (row?.status !== 'failed') throw new NotFailed(row?.status);
    body = row.body;
    truncated = row.body_truncated;
    if (options.republish) {
      // Stored through core's jsonb codec (a header may hold a NUL): decode before use.
      const plan = republishPlan(
        consumer,
        id,
        { ...row, origin: fromJsonb<Origin | null>(row.origin) },
        options,
      );
      const rowId = (
        await client.query<{ row_id: string }>(db.sql.republish, [
          plan.destination,
          plan.key ?? null,
          plan.body,
          toJsonb(plan.headers),
          id,
        ])
      ).rows[0]!.row_id;
      republished = { destination: plan.destination, key: plan.key, outboxRowId: rowId };
    }
    if (body !== null) {
      if (options.out !== undefined && options.out !== '-') await writeFile(options.out, body);
      else if (!json && (!options.republish || options.out === '-')) io.stdout.write(body);
    }
    await client.query(db.sql.deleteFailed, [consumer, id]);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch((e: Error) => {
      broken = e;
    });
    if (!(err instanceof NotFailed)) throw err;
    // Outside the transaction: name what is unknown, the consumer or the id (exit 5).
    if (err.status === undefined) await findInboxRow(db, consumer, id);
    throw notFailed(db, consumer, id, err.status ?? 'gone');
  } finally {
    client.release(broken);
  }
  // Relays poll too: a lost wake-up only delays the send.
  if (republished) await db.pool.query(db.sql.notify, [outboxChannelOf(db.schema)]).catch(() => {});
  if (body === null)
    io.stderr.write(`warning: no body was stored for ${JSON.stringify(id)}; nothing was saved\n`);
  else if (truncated) {
    io.stderr.write(
      `warning: the stored body was truncated (${body.length} bytes kept): it is not the whole message\n`,
    );
  }
  // With --republish the body is only written where --out says; without, stdout by default.
  const where =
    body === null || (options.republish && options.out === undefined)
      ? ''
      : options.out !== undefined && options.out !== '-'
        ? options.out
        : 'stdout';
  const sent = republished
    ? `. Republished through the outbox to ${JSON.stringify(republished.destination)}` +
      `${republished.key === undefined ? '' : ` with key ${JSON.stringify(republished.key)}`}` +
      ` under its own message id (outbox row ${republished.outboxRowId}); a relay with a publisher for that destination sends it`
    : '';
  const text =
    `deleted the failed record of ${JSON.stringify(id)} (consumer ${JSON.stringify(consumer)}); ` +
    `its next delivery is processed afresh${sent}${where ? `. Body (${formatBytes(body?.length ?? 0)}) written to ${where}` : ''}`;
  return {
    data: {
      schema: db.schema,
      consumer,
      messageId: id,
      deleted: true,
      republished: republished
        ? {
            destination: republished.destination,
            key: republished.key ?? null,
            outboxRowId: republished.outboxRowId,
          }
        : false,
      body:
        body === null
          ? null
          : {
              bytes: body.length,
              truncated,
              base64: body.toString('base64'),
              ...(options.out === undefined ? {} : { out: options.out }),
            },
    },
    text,
    // The body went to stdout: keep it clean for redirection.
    ...(where === 'stdout' ? { stream: 'stderr' as const } : {}),
  };
}

/**
 * `once failed discard <consumer> <id>`: the failure is acknowledged and the message given up.
 * The row becomes `done` (error and body kept until it expires), so redeliveries are acked as
 * duplicates instead of being dead-lettered again.
 */
export async function failedDiscardCommand(db: Database, consumer: string, id: string): Promise<Report> {
  await requireSchema(db);
  const changed = (await db.pool.query(db.sql.discardFailed, [consumer, id])).rowCount ?? 0;
  if (changed === 0) {
    const row = await findInboxRow(db, consumer, id);
    throw notFailed(db, consumer, id, row.status);
  }
  return {
    data: { schema: db.schema, consumer, messageId: id, discarded: true },
    text: `discarded the failure of ${JSON.stringify(id)} (consumer ${JSON.stringify(consumer)}): later deliveries are acked as duplicates`,
  };
}

/** Where a failed message came from, as core stores it (schema version 5 and later). */
interface Origin {
  broker?: string;
  queue?: string;
  key?: string;
  headers?: Record<string, string>;
}

interface Republished {
  destination: string;
  key: string | undefined;
  outboxRowId: string;
}

/** Headers that belong to one delivery, not to the message: never carried into a republish. */
const DELIVERY_HEADER = /^(message-id$|x-once-|x-death$|x-delivery-count$|x-first-death-)/i;

/**
 * What `--republish` writes to the outbox, or a usage error (nothing changed) that says what is
 * missing: a stored body, a whole one, and a destination (given, or the Kafka topic or SQS queue
 * the message came from; a RabbitMQ queue is not an exchange, so there `--to` is required).
 */
function republishPlan(
  consumer: string,
  id: string,
  row: { body: Buffer | null; body_truncated: boolean; origin: Origin | null },
  options: FailedRetryOptions,
): { destination: string; key: string | undefined; body: Buffer; headers: Record<string, string> } {
  const which = `message ${JSON.stringify(id)} of consumer ${JSON.stringify(consumer)}`;
  const refuse = (code: string, why: string) =>
    new CliError(ExitCode.Usage, code, `cannot republish ${which}: ${why}. Nothing was changed`);
  if (row.body === null) throw refuse('NO_BODY', 'no body was stored for it');
  if (row.body_truncated) {
    throw refuse(
      'BODY_TRUNCATED',
      `its stored body was truncated to ${row.body.length} bytes (raise the inbox's failedBodyMaxBytes)`,
    );
  }
  const origin = row.origin ?? {};
  const fromSource = origin.broker === 'kafka' || origin.broker === 'sqs' ? origin.queue : undefined;
  const destination = options.to ?? fromSource;
  if (destination === undefined) {
    throw refuse(
      'NO_DESTINATION',
      origin.broker === 'rabbitmq'
        ? `it came from RabbitMQ queue ${JSON.stringify(origin.queue)}, and a queue is not an exchange: pass --to <exchange> (and --key <routing key> if it differs from ${JSON.stringify(origin.key ?? '')})`
        : row.origin === null
          ? 'its source was not recorded (it failed before schema version 5): pass --to <destination>'
          : `it came from ${origin.broker ?? 'an unknown broker'} ${JSON.stringify(origin.queue ?? '')}, which has no default destination: pass --to <destination>`,
    );
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(origin.headers ?? {}))
    if (!DELIVERY_HEADER.test(name) && typeof value === 'string') headers[name] = value;
  return { destination, key: options.key ?? origin.key, body: row.body, headers };
}
