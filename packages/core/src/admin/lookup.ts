import type { Origin } from '../message/envelope.js';
import type { Queryable } from '../pg/pg-like.js';
import { fromJsonb } from '../sql/jsonb.js';
import { AdminError, AdminErrorCode } from './admin-error.js';
import { type MessageKey, sqlOf } from './admin-sql.js';

/** One inbox row, its jsonb columns decoded through core's codec. */
export interface InboxRecord {
  /** The consumer name the rows are recorded under. */
  readonly consumer: string;
  /** The message id. */
  readonly messageId: string;
  /** `in_progress` only in lease mode. A `done` row with an `error` is a discarded failure. */
  readonly status: 'done' | 'failed' | 'in_progress';
  /** SHA-256 of the body (or of the inbox's `fingerprintOf`). */
  readonly fingerprint: Buffer;
  /** The handler's stored result (with `storeResult`), else null. */
  readonly result: unknown;
  /** The recorded error of a failed (or discarded) row, usually a `SerializedError`; else null. */
  readonly error: unknown;
  /** The body of a failed row (up to `failedBodyMaxBytes`), else null. */
  readonly body: Buffer | null;
  /** True when the stored body was cut at `failedBodyMaxBytes`. */
  readonly bodyTruncated: boolean;
  /** Where a failed message came from (schema version 5 on); null otherwise. */
  readonly origin: Partial<Origin> | null;
  /** Attempts recorded for the message (claims, in lease mode). */
  readonly attempts: number;
  /** When the row was written. */
  readonly createdAt: Date;
  /** When the row expires and `purge` may remove it. */
  readonly expiresAt: Date;
  /** Lease mode: the worker holding the lease, null when released. Absent before schema version 3. */
  readonly owner?: string | null;
  /** Lease mode: when the lease ends. Absent before schema version 3. */
  readonly leaseUntil?: Date | null;
  /**
   * The response stored with an HTTP idempotency key (`@once/http`): status, header pairs and
   * body bytes; null on other rows. Absent before schema version 8.
   */
  readonly response?: {
    /** The HTTP status code that was stored. */
    status: number;
    /** The stored response headers, as name and value pairs in order. */
    headers: Array<[string, string]>;
    /** The stored response body, as bytes. */
    body: Buffer;
  } | null;
}

/** A durable step recorded in lease mode. */
export interface StepRecord {
  /** The step's name. */
  readonly step: string;
  /** Position of the step in the run that recorded it (1-based). */
  readonly seq: number;
  /** The inbox attempt that recorded it. */
  readonly attempt: number;
  /** The step's result, decoded; null when it returned undefined. */
  readonly result: unknown;
  /** When the step's result was recorded. */
  readonly recordedAt: Date;
}

interface InboxRowData {
  consumer: string;
  message_id: string;
  status: InboxRecord['status'];
  fingerprint: Buffer;
  result: unknown;
  error: unknown;
  body: Buffer | null;
  body_truncated: boolean;
  origin?: unknown;
  attempts: number;
  created_at: Date;
  expires_at: Date;
  owner?: string | null;
  lease_until?: Date | null;
  response_status?: number | null;
  response_headers?: Array<[string, string]> | null;
  response_body?: Buffer | null;
}

/** Whether `consumer` has any inbox row. */
export async function consumerExists(db: Queryable, schema: string, consumer: string): Promise<boolean> {
  const res = await db.query<{ found: boolean }>(sqlOf(schema).consumerExists, [consumer]);
  return res.rows[0]?.found === true;
}

/** The inbox row of (consumer, message id), or undefined. */
export async function findInboxRow(
  db: Queryable,
  schema: string,
  key: MessageKey,
): Promise<InboxRecord | undefined> {
  const r = (await db.query<InboxRowData>(sqlOf(schema).inboxRow, [key.consumer, key.messageId])).rows[0];
  if (!r) return undefined;
  return {
    consumer: r.consumer,
    messageId: r.message_id,
    status: r.status,
    fingerprint: r.fingerprint,
    // jsonb columns are written through core's codec (NUL and lone surrogates tagged).
    result: fromJsonb(r.result),
    error: fromJsonb(r.error),
    body: r.body,
    bodyTruncated: r.body_truncated,
    origin: fromJsonb<Partial<Origin> | null>(r.origin ?? null),
    attempts: r.attempts,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    // Columns of schema version 3: absent on older schemas, so absent here too.
    ...('owner' in r ? { owner: r.owner ?? null, leaseUntil: r.lease_until ?? null } : {}),
    // Columns of schema version 8 (@once/http's stored responses).
    ...('response_status' in r
      ? {
          response:
            r.response_status === null || r.response_status === undefined
              ? null
              : {
                  status: r.response_status,
                  headers: r.response_headers ?? [],
                  body: r.response_body ?? Buffer.alloc(0),
                },
        }
      : {}),
  };
}

/**
 * The inbox row of (consumer, message id). Throws an {@link AdminError} naming what is unknown:
 * `UNKNOWN_CONSUMER` (no rows at all) or `UNKNOWN_MESSAGE`.
 */
export async function getInboxRow(db: Queryable, schema: string, key: MessageKey): Promise<InboxRecord> {
  const row = await findInboxRow(db, schema, key);
  if (row) return row;
  await requireConsumer(db, schema, key.consumer);
  throw new AdminError(schema, { code: AdminErrorCode.UnknownMessage, ...key });
}

/** Throws `UNKNOWN_CONSUMER` when the consumer has no inbox rows. */
export async function requireConsumer(db: Queryable, schema: string, consumer: string): Promise<void> {
  if (!(await consumerExists(db, schema, consumer)))
    throw new AdminError(schema, { code: AdminErrorCode.UnknownConsumer, consumer });
}

/** The recorded steps of (consumer, message id), in order; none when the schema has no steps table. */
export async function readSteps(db: Queryable, schema: string, key: MessageKey): Promise<StepRecord[]> {
  const sql = sqlOf(schema);
  const has = await db.query<{ found: boolean }>(sql.hasSteps, [sql.stepsRelation]);
  if (has.rows[0]?.found !== true) return [];
  const rows = (
    await db.query<{ step: string; seq: number; attempt: number; result: unknown; recorded_at: Date }>(
      sql.steps,
      [key.consumer, key.messageId],
    )
  ).rows;
  return rows.map((s) => ({
    step: s.step,
    seq: s.seq,
    attempt: s.attempt,
    result: fromJsonb(s.result),
    recordedAt: s.recorded_at,
  }));
}
