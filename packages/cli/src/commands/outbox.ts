import { type DestinationStats, MAX_ID_LENGTH, outboxStats, retryOutbox } from '@once/core/admin';
import { CliError } from '../cli-error.js';
import { type Database, requireSchema } from '../database.js';
import { escapeText, showName } from '../escape-text.js';
import { ExitCode } from '../exit-codes.js';
import { formatDuration, formatTable, formatTime } from '../format.js';
import type { Report } from '../report.js';

/** `once outbox status`: pending, sent and failed rows per destination, and the oldest pending. */
export async function outboxStatusCommand(db: Database): Promise<Report> {
  await requireSchema(db);
  const rows = await outboxStats(db.pool, db.schema);
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
  // Core wakes the relays once the update committed; an unknown id or a row that is not failed
  // is an AdminError that exitOf words (exit 5).
  const retried = await retryOutbox(db.pool, db.schema, id !== undefined ? { id } : { allFailed: true });
  const what = id === undefined ? 'all failed rows' : escapeText(id);
  return {
    data: { schema: db.schema, retried, ...(id === undefined ? {} : { id }) },
    text:
      retried === 0
        ? 'no failed outbox messages to retry'
        : `${retried} outbox message${retried === 1 ? '' : 's'} back to pending (${what}); relays will publish ${retried === 1 ? 'it' : 'them'} again`,
  };
}

/** The outbox per destination and in total; shared with `once status`. */
export function outboxSummary(rows: readonly DestinationStats[]) {
  const ages = rows.map((r) => r.oldestPendingAgeSeconds).filter((a): a is number => a !== null);
  const dates = rows.map((r) => r.oldestPendingAt).filter((d): d is Date => d !== null);
  const sum = (f: (r: DestinationStats) => number) => rows.reduce((acc, r) => acc + f(r), 0);
  return {
    destinations: rows.map((r) => ({
      destination: r.destination,
      pending: r.pending,
      sent: r.sent,
      failed: r.failed,
      oldestPendingAt: r.oldestPendingAt,
      oldestPendingAgeSeconds: r.oldestPendingAgeSeconds,
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
export function outboxTable(rows: readonly DestinationStats[]): string {
  if (rows.length === 0) return 'outbox: empty';
  const s = outboxSummary(rows);
  const age = (a: number | null, at: Date | null) =>
    a === null ? '-' : `${formatDuration(a)} (${formatTime(at)})`;
  return formatTable(
    ['destination', 'pending', 'sent', 'failed', 'oldest pending'],
    [
      ...rows.map((r) => [
        showName(r.destination),
        String(r.pending),
        String(r.sent),
        String(r.failed),
        age(r.oldestPendingAgeSeconds, r.oldestPendingAt),
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
