import { LATEST_SCHEMA_VERSION } from '@once/core';
import { type Database, migrateCommandLine, schemaVersion } from '../database.js';
import { formatDuration, formatTable, formatTime } from '../format.js';
import type { Report } from '../report.js';
import { type DestinationRow, outboxSummary, outboxTable } from './outbox.js';

interface ConsumerRow {
  consumer: string;
  total: number;
  done: number;
  failed: number;
  in_progress: number;
  expired: number;
  oldest_at: Date | null;
  oldest_age_s: number | null;
}

/** The first version with an outbox table (see core's migrations.ts). */
const OUTBOX_VERSION = 2;

/**
 * `once status`: schema version, inbox rows per consumer (done, failed, expired, oldest) and
 * the outbox by status. An older schema is shown as far as it goes, flagged for `once migrate`;
 * a missing or newer one is exit 4.
 */
export async function statusCommand(db: Database): Promise<Report> {
  const version = await schemaVersion(db);
  const inbox = version >= 1 ? (await db.pool.query<ConsumerRow>(db.sql.inboxByConsumer)).rows : [];
  const outbox =
    version >= OUTBOX_VERSION ? (await db.pool.query<DestinationRow>(db.sql.outboxByDestination)).rows : null;
  const inboxTotals = {
    rows: sum(inbox, (r) => r.total),
    done: sum(inbox, (r) => r.done),
    failed: sum(inbox, (r) => r.failed),
    inProgress: sum(inbox, (r) => r.in_progress),
    expired: sum(inbox, (r) => r.expired),
  };
  const data = {
    schema: db.schema,
    version,
    latestVersion: LATEST_SCHEMA_VERSION,
    upToDate: version === LATEST_SCHEMA_VERSION,
    inbox: {
      consumers: inbox.map((r) => ({
        consumer: r.consumer,
        rows: r.total,
        done: r.done,
        failed: r.failed,
        inProgress: r.in_progress,
        expired: r.expired,
        oldestAt: r.oldest_at,
        oldestAgeSeconds: r.oldest_age_s,
      })),
      totals: inboxTotals,
    },
    outbox: outbox === null ? null : outboxSummary(outbox),
  };
  return { data, text: statusText(data, inbox, outbox) };
}

function statusText(
  data: { schema: string; version: number; upToDate: boolean },
  inbox: readonly ConsumerRow[],
  outbox: readonly DestinationRow[] | null,
): string {
  const head = data.upToDate
    ? `schema ${data.schema}: version ${data.version} (up to date)`
    : `schema ${data.schema}: version ${data.version}, this once needs ${LATEST_SCHEMA_VERSION}: run \`${migrateCommandLine(data.schema)}\``;
  const inboxText =
    inbox.length === 0
      ? 'inbox: empty'
      : formatTable(
          ['consumer', 'rows', 'done', 'failed', 'in progress', 'expired', 'oldest row'],
          inbox.map((r) => [
            r.consumer,
            String(r.total),
            String(r.done),
            String(r.failed),
            String(r.in_progress),
            String(r.expired),
            `${formatDuration(r.oldest_age_s)} (${formatTime(r.oldest_at)})`,
          ]),
        );
  const outboxText =
    outbox === null ? `outbox: not installed (needs schema version ${OUTBOX_VERSION})` : outboxTable(outbox);
  return [head, '', inboxText, '', outboxText].join('\n');
}

function sum<T>(rows: readonly T[], f: (r: T) => number): number {
  return rows.reduce((acc, r) => acc + f(r), 0);
}
