import { countExpired, purge } from '@once/core/admin';
import { type Database, requireSchema } from '../database.js';
import { interruptedExit } from '../interrupted.js';
import type { CliIo } from '../io.js';
import { createProgress } from '../progress.js';
import type { Report } from '../report.js';

/** Options of `once purge`, passed to core's `purge`. */
export interface PurgeCommandOptions {
  /** Rows deleted per statement. @default 5000 */
  readonly batchSize: number;
  /** Stop after this many rows. @default no limit */
  readonly maxRows?: number | undefined;
  /** Pause between batches, in ms. @default 0 */
  readonly pauseMs: number;
  /** Average rate cap, rows per second. @default no limit */
  readonly rowsPerSecond?: number | undefined;
}

/**
 * `once purge`: deletes expired inbox rows in small batches (core's `purge`). Progress goes to
 * stderr: a bar on a terminal, plain lines otherwise, nothing under `--json`. An abort (Ctrl-C)
 * stops between batches, reports what was deleted and exits 130 (143 for SIGTERM).
 */
export async function purgeCommand(
  db: Database,
  io: CliIo,
  json: boolean,
  options: PurgeCommandOptions,
): Promise<Report> {
  await requireSchema(db);
  const expired = await countExpired(db.pool, db.schema);
  const total = options.maxRows === undefined ? expired : Math.min(expired, options.maxRows);
  const progress = json ? undefined : createProgress(io.stderr, { unit: 'rows', verb: 'purged', total });
  let deleted = 0;
  try {
    deleted = await purge(db.pool, {
      schema: db.schema,
      batchSize: options.batchSize,
      pauseMs: options.pauseMs,
      ...(options.maxRows === undefined ? {} : { maxRows: options.maxRows }),
      ...(options.rowsPerSecond === undefined ? {} : { rowsPerSecond: options.rowsPerSecond }),
      ...(io.signal ? { signal: io.signal } : {}),
      onProgress: (n) => {
        deleted = n;
        progress?.update(n);
      },
    });
  } finally {
    if (total > 0 || deleted > 0) progress?.finish(deleted);
  }
  const exitCode = interruptedExit(io.signal);
  const stopped = exitCode !== undefined;
  // The cap is echoed so that a log of the run says it was throttled (and by how much).
  const rate = options.rowsPerSecond;
  return {
    data: {
      schema: db.schema,
      deleted,
      expiredBefore: expired,
      stopped,
      ...(rate === undefined ? {} : { rowsPerSecond: rate }),
    },
    text: `${stopped ? 'stopped: ' : ''}purged ${deleted} expired row${deleted === 1 ? '' : 's'} from schema ${db.schema}${rate === undefined ? '' : ` at most ${rate} rows/s`}`,
    // Interrupted: the work done is reported, and the exit code says it is not all.
    ...(exitCode === undefined ? {} : { exitCode }),
  };
}
