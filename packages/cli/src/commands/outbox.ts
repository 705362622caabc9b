import { MAX_ID_LENGTH } from '@once/core';
import { CliError } from '../cli-error.js';
import { type Database, requireSchema } from '../database.js';
import { ExitCode } from '../exit-codes.js';
import { formatDuration, formatTable, formatTime } from '../format.js';
import type { Report } from '../report.js';
import { outboxChannelOf } from '../sql.js';

/** One destination's row of the outbox summary query. */
export interface DestinationRow {
  destination: string;
  pending: number;
  sent: number;
  failed: number;
  oldest_pending_at: Date | null;
  oldest_pending_age_s: number | null;
}

/** `once outbox status`: pending, sent and failed rows per destination, and the oldest pending. */
export async function outboxStatusCommand(db: Database): Promise<Report> {
  await requireSchema(db);
  const rows = (await db.pool.query<DestinationRow>(db.sql.outboxByDestination)).rows;
  return { data: { schema: db.schema, ...outboxSummary(rows) }, text: outboxTable(rows) };
}

/** Which failed rows `once outbox retry` puts back. */
export interface OutboxRetryOptions {
  /** One row, by its message id: the row's UUID, or the id it was enqueued with (a republished message keeps its own). */
  readonly id?: string | undefined;
  /** Every failed row. */
  readonly allFailed?: boolean | undefined;
}

/** Usage checks of `once outbox retry`, before the database is touched: exactly one selector, an id that fits. */
export function checkOutboxRetryOptions(options: OutboxRetryOptions): void {
  const { id, allFailed = false } = options;
  if ((id === undefined) === !allFailed) {
    throw new CliError(
      ExitCode.Usage,
      'USAGE',
      'outbox retry needs exactly one of --id <message id> and --all-failed',
    );
  }
  if (id !== undefined && (id.length === 0 || id.length > MAX_ID_LENGTH)) {
    throw new CliError(
      ExitCode.Usage,
      'USAGE',
      `--id must be an outbox message id of 1 to ${MAX_ID_LENGTH} characters, got ${id.length}`,
    );
  }
}

/**
 * `once outbox retry`: failed (parked) rows go back to pending with a fresh attempt budget,
 * due now, and relays are woken. Exactly one of `--id` and `--all-failed`.
 */
export async function outboxRetryCommand(db: Database, options: OutboxRetryOptions): Promise<Report> {
  checkOutboxRetryOptions(options);
  const { id } = options;
  await requireSchema(db);
  let retried: number;
  if (id !== undefined) {
    retried = (await db.pool.query(db.sql.outboxRetryOne, [id])).rowCount ?? 0;
    if (retried === 0) {
      const found = (await db.pool.query<{ status: string }>(db.sql.outboxFind, [id])).rows[0];
      throw found
        ? new CliError(
            ExitCode.NotFound,
            'NOT_FAILED',
            `outbox message ${id} in schema ${db.schema} is ${found.status}, not failed: nothing to retry`,
          )
        : new CliError(
            ExitCode.NotFound,
            'UNKNOWN_OUTBOX_ID',
            `no outbox message ${id} in schema ${db.schema}`,
          );
    }
  } else {
    retried = (await db.pool.query(db.sql.outboxRetryAll)).rowCount ?? 0;
  }
  // Relays poll anyway; the wake-up only saves them the wait. It is sent after the update committed.
  if (retried > 0) await db.pool.query(db.sql.notify, [outboxChannelOf(db.schema)]);
  const what = id ?? 'all failed rows';
  return {
    data: { schema: db.schema, retried, ...(id === undefined ? {} : { id }) },
    text:
      retried === 0
        ? 'no failed outbox messages to retry'
        : `${retried} outbox message${retried === 1 ? '' : 's'} back to pending (${what}); relays will publish ${retried === 1 ? 'it' : 'them'} again`,
  };
}

/** The outbox per destination and in total; shared with `once status`. */
export function outboxSummary(rows: readonly DestinationRow[]) {
  const ages = rows.map((r) => r.oldest_pending_age_s).filter((a): a is number => a !== null);
  const dates = rows.map((r) => r.oldest_pending_at).filter((d): d is Date => d !== null);
  const sum = (f: (r: DestinationRow) => number) => rows.reduce((acc, r) => acc + f(r), 0);
  return {
    destinations: rows.map((r) => ({
      destination: r.destination,
      pending: r.pending,
      sent: r.sent,
      failed: r.failed,
      oldestPendingAt: r.oldest_pending_at,
      oldestPendingAgeSeconds: r.oldest_pending_age_s,
    })),
    totals: {
      pending: sum((r) => r.pending),
      sent: sum((r) => r.sent),
      failed: sum((r) => r.failed),
      oldestPendingAt: dates.length ? new Date(Math.min(...dates.map((d) => d.getTime()))) : null,
      oldestPendingAgeSeconds: ages.length ? Math.max(...ages) : null,
    },
  };
}

/** The outbox table of `status` and `outbox status`. */
export function outboxTable(rows: readonly DestinationRow[]): string {
  if (rows.length === 0) return 'outbox: empty';
  const s = outboxSummary(rows);
  const age = (a: number | null, at: Date | null) =>
    a === null ? '-' : `${formatDuration(a)} (${formatTime(at)})`;
  return formatTable(
    ['destination', 'pending', 'sent', 'failed', 'oldest pending'],
    [
      ...rows.map((r) => [
        r.destination,
        String(r.pending),
        String(r.sent),
        String(r.failed),
        age(r.oldest_pending_age_s, r.oldest_pending_at),
      ]),
      [
        '(total)',
        String(s.totals.pending),
        String(s.totals.sent),
        String(s.totals.failed),
        age(s.totals.oldestPendingAgeSeconds, s.totals.oldestPendingAt),
      ],
    ],
  );
}
