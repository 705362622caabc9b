import { CliError } from '../cli-error.js';
import type { Database } from '../database.js';
import { ExitCode } from '../exit-codes.js';

/** An inbox row as the CLI reads it. */
export interface InboxRow {
  consumer: string;
  message_id: string;
  /** `in_progress` only in lease mode (schema version 3 on). */
  status: 'done' | 'failed' | 'in_progress';
  fingerprint: Buffer;
  result: unknown;
  error: unknown;
  body: Buffer | null;
  body_truncated: boolean;
  /** Where a failed message came from (schema version 5 on); null otherwise. */
  origin?: unknown;
  attempts: number;
  created_at: Date;
  expires_at: Date;
  /** Lease mode: the worker holding the lease (null when released). Absent before schema version 3. */
  owner?: string | null;
  /** Lease mode: when the lease ends. Absent before schema version 3. */
  lease_until?: Date | null;
}

/** A durable step recorded in lease mode. */
export interface StepRow {
  step: string;
  seq: number;
  attempt: number;
  result: unknown;
  recorded_at: Date;
}

/** The recorded steps of (consumer, id), in order; none when the schema has no steps table. */
export async function readSteps(db: Database, consumer: string, id: string): Promise<StepRow[]> {
  const has = await db.pool.query<{ found: boolean }>(db.sql.hasSteps, [db.sql.stepsRelation]);
  if (has.rows[0]?.found !== true) return [];
  return (await db.pool.query<StepRow>(db.sql.steps, [consumer, id])).rows;
}

/** Throws exit 5 when the consumer has no inbox rows at all (a typo, most often). */
export async function requireConsumer(db: Database, consumer: string): Promise<void> {
  const res = await db.pool.query<{ found: boolean }>(db.sql.consumerExists, [consumer]);
  if (res.rows[0]?.found !== true) throw unknownConsumer(db, consumer);
}

/** The inbox row of (consumer, id), or exit 5 naming what is unknown: the consumer or the id. */
export async function findInboxRow(db: Database, consumer: string, id: string): Promise<InboxRow> {
  const res = await db.pool.query<InboxRow>(db.sql.inspect, [consumer, id]);
  const row = res.rows[0];
  if (row) return row;
  await requireConsumer(db, consumer);
  throw new CliError(
    ExitCode.NotFound,
    'UNKNOWN_MESSAGE',
    `no message ${JSON.stringify(id)} for consumer ${JSON.stringify(consumer)} in schema ${db.schema} (rows are purged once they expire)`,
  );
}

function unknownConsumer(db: Database, consumer: string): CliError {
  return new CliError(
    ExitCode.NotFound,
    'UNKNOWN_CONSUMER',
    `unknown consumer ${JSON.stringify(consumer)}: it has no rows in schema ${db.schema} (see \`once status\` for the consumers there are)`,
  );
}

/** Exit 5 for a row that exists but is not a parked failure. */
export function notFailed(db: Database, consumer: string, id: string, status: string): CliError {
  return new CliError(
    ExitCode.NotFound,
    'NOT_FAILED',
    `message ${JSON.stringify(id)} of consumer ${JSON.stringify(consumer)} in schema ${db.schema} is ${status}, not failed: nothing to do`,
  );
}
