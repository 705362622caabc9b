import {
  type ConsumerStats,
  type DestinationStats,
  inboxStats,
  LATEST_SCHEMA_VERSION,
  outboxStats,
} from '@once/core/admin';
import { type Database, migrateCommandLine, schemaState } from '../database.js';
import { showName } from '../escape-text.js';
import { formatDuration, formatTable, formatTime } from '../format.js';
import type { Report } from '../report.js';
import { outboxSummary, outboxTable } from './outbox.js';

/** The first version with an outbox table (see core's migrations.ts). */
const OUTBOX_VERSION = 2;

/**
 * `once status`: schema version and the oldest code version that runs on it, inbox rows per
 * consumer (done, failed, expired, oldest) and the outbox by status. An older schema is shown as
 * far as it goes, flagged for `once migrate`; a newer one this build runs on is shown as such; a
 * missing one, or a newer one that removed what this build uses, is exit 4.
 */
export async function statusCommand(db: Database): Promise<Report> {
  const { version, status, compatibleFrom } = await schemaState(db);
  const inbox = version >= 1 ? await inboxStats(db.pool, db.schema) : [];
  const outbox = version >= OUTBOX_VERSION ? await outboxStats(db.pool, db.schema) : null;
  const inboxTotals = {
    rows: sum(inbox, (r) => r.rows),
    done: sum(inbox, (r) => r.done),
    failed: sum(inbox, (r) => r.failed),
    inProgress: sum(inbox, (r) => r.inProgress),
    expired: sum(inbox, (r) => r.expired),
  };
  const data = {
    schema: db.schema,
    version,
    latestVersion: LATEST_SCHEMA_VERSION,
    /** `behind`, `current` or `ahead` (a newer schema this once still runs on). */
    status,
    compatibleFrom,
    upToDate: version >= LATEST_SCHEMA_VERSION,
    inbox: {
      consumers: inbox.map((r) => ({ ...r })),
      totals: inboxTotals,
    },
    outbox: outbox === null ? null : outboxSummary(outbox),
  };
  return { data, text: statusText(data, inbox, outbox) };
}

function statusText(
  data: { schema: string; version: number; status: string; compatibleFrom: number | null },
  inbox: readonly ConsumerStats[],
  outbox: readonly DestinationStats[] | null,
): string {
  const compat = `compatible from version ${data.compatibleFrom}`;
  const head =
    data.status === 'current'
      ? `schema ${data.schema}: version ${data.version} (up to date; ${compat})`
      : data.status === 'ahead'
        ? `schema ${data.schema}: version ${data.version}, newer than this once (${LATEST_SCHEMA_VERSION}); ${compat}, so this once runs on it`
        : `schema ${data.schema}: version ${data.version}, this once needs ${LATEST_SCHEMA_VERSION}: run \`${migrateCommandLine(data.schema)}\``;
  const inboxText =
    inbox.length === 0
      ? 'inbox: empty'
      : formatTable(
          ['consumer', 'rows', 'done', 'failed', 'in progress', 'expired', 'oldest row'],
          inbox.map((r) => [
            showName(r.consumer),
            String(r.rows),
            String(r.done),
            String(r.failed),
            String(r.inProgress),
            String(r.expired),
            `${formatDuration(r.oldestAgeSeconds)} (${formatTime(r.oldestAt)})`,
          ]),
        );
  const outboxText =
    outbox === null ? `outbox: not installed (needs schema version ${OUTBOX_VERSION})` : outboxTable(outbox);
  return [head, '', inboxText, '', outboxText].join('\n');
}

function sum<T>(rows: readonly T[], f: (r: T) => number): number {
  return rows.reduce((acc, r) => acc + f(r), 0);
}
