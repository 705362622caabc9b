import { writeFile } from 'node:fs/promises';
import { ErrorCode, OnceError } from '@once/core';
import { discardFailed, listFailed, RepublishDedup, retryFailed } from '@once/core/admin';
import { CliError } from '../cli-error.js';
import { type Database, requireSchema } from '../database.js';
import { escapeLines, showName } from '../escape-text.js';
import { ExitCode } from '../exit-codes.js';
import { formatBytes, formatTable, formatTime } from '../format.js';
import type { CliIo } from '../io.js';
import { quote } from '../json-text.js';
import type { Report } from '../report.js';
import { errorLine } from './inspect.js';

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
  // An unknown --consumer is exit 5 (UNKNOWN_CONSUMER).
  const { total, failed: rows } = await listFailed(db.pool, db.schema, {
    consumer: options.consumer,
    limit: options.limit,
  });
  const data = { schema: db.schema, total, failed: rows };
  if (rows.length === 0) return { data, text: 'no failed messages' };
  const table = formatTable(
    ['consumer', 'message id', 'attempts', 'failed at', 'body', 'error'],
    rows.map((r) => [
      showName(r.consumer),
      showName(r.messageId),
      String(r.attempts),
      formatTime(r.failedAt),
      r.bodyBytes === null ? '-' : `${formatBytes(r.bodyBytes)}${r.bodyTruncated ? ' (cut)' : ''}`,
      errorLine(r.error),
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

/**
 * The outbox destination `--to ''` stands for: RabbitMQ's default exchange, whose own name no
 * outbox destination can have; @once/rabbitmq's publisher sends `amq.default` to it.
 */
export const RABBIT_DEFAULT_EXCHANGE = 'amq.default';

/** Refuses what `failed retry` cannot do, before the database is touched. */
export function checkFailedRetryOptions(options: FailedRetryOptions, json: boolean): void {
  if (!options.republish && (options.to !== undefined || options.key !== undefined)) {
    throw new CliError(ExitCode.Usage, 'USAGE', '--to and --key only apply with --republish');
  }
  if (options.to !== undefined && options.to.length === 0 && options.key === undefined) {
    throw new CliError(
      ExitCode.Usage,
      'USAGE',
      "--to '' is RabbitMQ's default exchange: give --key <queue> (the queue it delivers to)",
    );
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
  const key = { consumer, messageId: id };
  // Core refuses (nothing changed) recorded steps without --forget-steps, a republish it cannot
  // do, and a row that is not failed: exitOf words them.
  let result: Awaited<ReturnType<typeof retryFailed>>;
  try {
    result = await retryFailed(db.pool, db.schema, key, {
      forgetSteps: options.forgetSteps,
      republish: options.republish
        ? { destination: options.to === '' ? RABBIT_DEFAULT_EXCHANGE : options.to, key: options.key }
        : undefined,
      // Inside the transaction, before the delete: a failed write leaves the record in place.
      save: async ({ body }) => {
        if (body === null) return;
        if (options.out !== undefined && options.out !== '-') await writeFile(options.out, body);
        else if (!json && (!options.republish || options.out === '-')) {
          // A terminal shows the body, it cannot store it: its control characters (a producer's
          // ESC sequences) are escaped there, with --out - too. Redirected, the bytes are the body.
          io.stdout.write(io.stdout.isTTY === true ? escapeLines(body.toString('utf8')) : body);
          // On a terminal the status line follows on stderr: start it on a line of its own.
          // Redirected (or with --out -) the bytes stay exactly the stored body.
          if (options.out === undefined && io.stdout.isTTY === true && body.at(-1) !== 0x0a) {
            io.stdout.write('\n');
          }
        }
      },
    });
  } catch (err) {
    // The outbox's own checks (body size, key, headers), as for any enqueue.
    if (OnceError.is(err) && err.code === ErrorCode.OutboxInvalid) {
      throw new CliError(
        ExitCode.Usage,
        err.code,
        `cannot republish message ${quote(id)} of consumer ${quote(consumer)}: ${err.message}. Nothing was changed`,
        { cause: err },
      );
    }
    throw err;
  }
  const { body, bodyTruncated: truncated, republished } = result;
  if (body === null) io.stderr.write(`warning: no body was stored for ${quote(id)}; nothing was saved\n`);
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
    ? `. Republished through the outbox to ${quote(republished.destination)}` +
      `${republished.key === undefined ? '' : ` with key ${quote(republished.key)}`}` +
      ` under its own message id (outbox row ${republished.outboxRowId}); a relay with a publisher for that destination sends it` +
      DEDUP_TEXT[republished.dedup]
    : '';
  const text =
    `deleted the failed record of ${quote(id)} (consumer ${quote(consumer)}); ` +
    `its next delivery is processed afresh${sent}${
      republished?.destination === RABBIT_DEFAULT_EXCHANGE
        ? ` (${RABBIT_DEFAULT_EXCHANGE}: RabbitMQ's default exchange, routing straight to the queue named by the key; give your relay a RabbitMQ publisher for '${RABBIT_DEFAULT_EXCHANGE}')`
        : ''
    }${where ? `. Body (${formatBytes(body?.length ?? 0)}) written to ${where}` : ''}`;
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
            dedup: republished.dedup,
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

/** What `failed retry --republish` says of the broker's deduplication of the id, by case. */
const DEDUP_TEXT: Record<RepublishDedup, string> = {
  [RepublishDedup.WaitForWindow]:
    ". JetStream drops a second message with that Nats-Msg-Id inside the stream's duplicate_window: if it answers duplicate, the relay holds the message and sends it again once the window has passed",
  [RepublishDedup.FreshDeduplicationId]:
    '. The SQS FIFO queue drops a MessageDeduplicationId for five minutes: it goes with a fresh one, its id in the message-id attribute',
  [RepublishDedup.WindowPassed]:
    '. Its consumer takes ids from the MessageDeduplicationId: it goes under its own, the five minutes SQS FIFO drops it having passed',
  [RepublishDedup.None]: '',
  [RepublishDedup.Marked]:
    '. It is marked a republish: a broker that drops a repeated id (JetStream, SQS FIFO) holds it until its window has passed or gives it a deduplication id of its own',
};

/**
 * `once failed discard <consumer> <id>`: the failure is acknowledged and the message given up.
 * The row becomes `done` (error and body kept until it expires), so redeliveries are acked as
 * duplicates instead of being dead-lettered again.
 */
export async function failedDiscardCommand(db: Database, consumer: string, id: string): Promise<Report> {
  await requireSchema(db);
  await discardFailed(db.pool, db.schema, { consumer, messageId: id });
  return {
    data: { schema: db.schema, consumer, messageId: id, discarded: true },
    text: `discarded the failure of ${quote(id)} (consumer ${quote(consumer)}): later deliveries are acked as duplicates`,
  };
}
