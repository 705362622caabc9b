import { randomUUID } from 'node:crypto';
import { ErrorCode, OnceError } from '../errors.js';
import type { Origin } from '../message/envelope.js';
import { enqueueRow, Outbox } from '../outbox/outbox.js';
import type { PgPoolLike, Queryable } from '../pg/pg-like.js';
import { fromJsonb } from '../sql/jsonb.js';
import { AdminError, AdminErrorCode } from './admin-error.js';
import { type MessageKey, sqlOf } from './admin-sql.js';
import { getInboxRow, readSteps, requireConsumer } from './lookup.js';
import { wakeRelays } from './outbox-admin.js';
import { type RepublishDedup, type RepublishOptions, republishPlan } from './republish-plan.js';

/** One parked failure, as {@link listFailed} lists it. */
export interface FailedSummary {
  /** The consumer name the rows are recorded under. */
  readonly consumer: string;
  /** The message id. */
  readonly messageId: string;
  /** Attempts recorded for the message (claims, in lease mode). */
  readonly attempts: number;
  /** The recorded error, decoded (usually a `SerializedError`). */
  readonly error: unknown;
  /** When the failure was recorded. */
  readonly failedAt: Date;
  /** When the row expires and `purge` may remove it. */
  readonly expiresAt: Date;
  /** Size of the stored body; null when none was stored. */
  readonly bodyBytes: number | null;
  /** True when the stored body was cut at `failedBodyMaxBytes`. */
  readonly bodyTruncated: boolean;
}

/** Options of {@link listFailed}. */
export interface ListFailedOptions {
  /** Only this consumer's failures; an unknown consumer throws `UNKNOWN_CONSUMER`. @default all */
  readonly consumer?: string | undefined;
  /** At most this many rows. @default 100 */
  readonly limit?: number | undefined;
}

/** Parked failures, oldest first per consumer, and how many there are in all. */
export async function listFailed(
  db: Queryable,
  schema: string,
  options: ListFailedOptions = {},
): Promise<{
  /** How many parked failures match the filter, in all (not only the ones listed). */
  total: number;
  /** The parked failures listed, at most `limit` (100 by default), oldest first per consumer. */
  failed: FailedSummary[];
}> {
  const sql = sqlOf(schema);
  const consumer = options.consumer ?? null;
  const limit = options.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1) {
    throw new OnceError(ErrorCode.InvalidOption, `limit must be a positive integer, got ${limit}`);
  }
  if (consumer !== null) await requireConsumer(db, schema, consumer);
  const rows = (
    await db.query<{
      consumer: string;
      message_id: string;
      attempts: number;
      error: unknown;
      created_at: Date;
      expires_at: Date;
      body_bytes: number | null;
      body_truncated: boolean;
    }>(sql.failedList, [consumer, limit])
  ).rows;
  const total = (await db.query<{ n: number }>(sql.failedCount, [consumer])).rows[0]?.n ?? 0;
  return {
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
}

/** The stored copy of a failed message, handed to {@link RetryFailedOptions.save}. */
export interface FailedBody {
  /** Null when no body was stored. */
  readonly body: Buffer | null;
  /** The body was cut at `failedBodyMaxBytes`: it is not the whole message. */
  readonly bodyTruncated: boolean;
}

/** Options of {@link retryFailed}. */
export interface RetryFailedOptions {
  /**
   * Lease mode: delete the record even though it has recorded steps, which go with it, so their
   * effects run again on the next delivery. Without it such a retry throws `HAS_STEPS`.
   * @default false
   */
  readonly forgetSteps?: boolean | undefined;
  /**
   * Enqueue the stored body in the outbox under the message's own id, in the transaction that
   * deletes the record, through `Outbox.enqueue` and so with its checks (`OUTBOX_INVALID`). The
   * row is marked a republish, so that a broker deduplicating on the id inside a window does not
   * drop it there (see {@link (RepublishDedup:variable)}); a message from an SQS FIFO queue whose consumer
   * reads the MessageDeduplicationId is refused with `INSIDE_DEDUP_WINDOW` until five minutes
   * after its failure was recorded. @default no republish
   */
  readonly republish?:
    | (RepublishOptions & {
        /**
         * The outbox to enqueue the republish through; it must be of the same schema (`INVALID_OPTION`
         * otherwise). @default an outbox on the same pool and schema
         */
        readonly outbox?: Outbox | undefined;
      })
    | undefined;
  /**
   * Called inside the transaction, after the row is locked and before it is deleted (for the
   * CLI: write the body to a file). A throw rolls back: the record stays.
   */
  readonly save?: ((stored: FailedBody) => Promise<void> | void) | undefined;
}

/** What {@link retryFailed} did. */
export interface RetryFailedResult extends FailedBody {
  /** Where it was republished; undefined without `republish`. */
  readonly republished:
    | {
        /**
         * The destination it was enqueued for: the one given, or the topic, queue or exchange it came from.
         */
        readonly destination: string;
        /**
         * The key it was enqueued with (partition key, message group, routing key); undefined when it has
         * none.
         */
        readonly key: string | undefined;
        /** The message id it is published under: the failed message's own. */
        readonly messageId: string;
        /** The outbox row's UUID. */
        readonly outboxRowId: string;
        /** How it gets past the broker's deduplication of its id. */
        readonly dedup: RepublishDedup;
      }
    | undefined;
}

/**
 * Deletes a failed record so that the next delivery of its id is processed afresh; optionally
 * republishes its stored body through the outbox in the same transaction (sent if and only if
 * the deletion commits) and wakes the relays after commit. The row is locked while `save` runs,
 * so a consumer's claim of the id waits. Throws an {@link AdminError} (nothing changed) for an
 * unknown consumer or id, a row that is not failed, recorded steps without `forgetSteps`, or a
 * republish that cannot be done; `OUTBOX_INVALID` when the outbox refuses the message.
 */
export async function retryFailed(
  pool: PgPoolLike,
  schema: string,
  key: MessageKey,
  options: RetryFailedOptions = {},
): Promise<RetryFailedResult> {
  const sql = sqlOf(schema);
  const republish = options.republish;
  if (republish?.outbox !== undefined && republish.outbox.schema !== schema) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      `republish.outbox is of schema ${republish.outbox.schema}, not ${schema}`,
    );
  }
  // Lease mode records each external effect as a step, and the steps go with the inbox row: a
  // fresh run would repeat effects that already happened. Only the operator may decide that.
  const steps = await readSteps(pool, schema, key);
  if (steps.length > 0 && options.forgetSteps !== true) {
    throw new AdminError(schema, {
      code: AdminErrorCode.HasSteps,
      ...key,
      steps: steps.map((s) => s.step),
    });
  }
  const client = await pool.connect();
  let broken: Error | undefined;
  let stored: FailedBody | undefined;
  let status = 'gone';
  let republished: RetryFailedResult['republished'];
  try {
    await client.query(sql.begin);
    const row = (
      await client.query<{
        status: string;
        body: Buffer | null;
        body_truncated: boolean;
        origin: unknown;
        created_at: Date;
        now: Date;
      }>(sql.lockRow, [key.consumer, key.messageId])
    ).rows[0];
    if (row?.status !== 'failed') {
      status = row?.status ?? 'gone';
      await client.query(sql.rollback);
    } else {
      stored = { body: row.body, bodyTruncated: row.body_truncated };
      if (republish) republished = await republishRow(pool, client, schema, key, row, republish);
      await options.save?.(stored);
      await client.query(sql.deleteFailed, [key.consumer, key.messageId]);
      await client.query(sql.commit);
    }
  } catch (err) {
    await client.query(sql.rollback).catch((e: Error) => {
      broken = e;
    });
    throw err;
  } finally {
    client.release(broken);
  }
  // Outside the transaction, so the lookup does not need a second connection while one is held.
  if (stored === undefined) return notFailed(pool, schema, key, status);
  // Relays poll too: a lost wake-up only delays the send.
  if (republished) await wakeRelays(pool, schema).catch(() => {});
  return { ...stored, republished };
}

/**
 * Enqueues the stored body of a locked failed row through `Outbox.enqueue`'s checks and
 * statement, in the caller's transaction, under the message's own id.
 */
async function republishRow(
  pool: PgPoolLike,
  client: Queryable,
  schema: string,
  key: MessageKey,
  row: { body: Buffer | null; body_truncated: boolean; origin: unknown; created_at: Date; now: Date },
  options: NonNullable<RetryFailedOptions['republish']>,
): Promise<NonNullable<RetryFailedResult['republished']>> {
  // Stored through core's jsonb codec (a header may hold a NUL): decode before use.
  const plan = republishPlan(
    schema,
    key,
    {
      body: row.body,
      bodyTruncated: row.body_truncated,
      origin: fromJsonb<Partial<Origin> | null>(row.origin ?? null),
      failedAt: row.created_at,
      now: row.now,
    },
    options,
    randomUUID(),
  );
  // Without the application's outbox, one that accepts just this destination, default body limit.
  const outbox = options.outbox ?? new Outbox({ pool, schema, destinations: [plan.destination] });
  const written = await enqueueRow(
    outbox,
    client,
    plan.destination,
    plan.body,
    { key: plan.key, headers: plan.headers, messageId: key.messageId },
    plan.deduplicationId,
  );
  return {
    destination: plan.destination,
    key: plan.key,
    messageId: written.id,
    outboxRowId: written.rowId,
    dedup: plan.dedup,
  };
}

/** The row to retry is missing (`gone`) or not failed: name what is unknown, the consumer or the id. */
async function notFailed(db: Queryable, schema: string, key: MessageKey, status: string): Promise<never> {
  if (status === 'gone') await getInboxRow(db, schema, key);
  throw new AdminError(schema, {
    code: AdminErrorCode.NotFailed,
    ...key,
    status: status as 'done' | 'in_progress' | 'gone',
  });
}

/**
 * Gives a failed message up: its row becomes `done` (error and body kept until it expires), so
 * later deliveries of the id are acked as duplicates instead of failing again. Throws an
 * {@link AdminError} for an unknown consumer or id, or a row that is not failed.
 */
export async function discardFailed(db: Queryable, schema: string, key: MessageKey): Promise<void> {
  const changed = (await db.query(sqlOf(schema).discardFailed, [key.consumer, key.messageId])).rowCount ?? 0;
  if (changed > 0) return;
  const row = await getInboxRow(db, schema, key);
  throw new AdminError(schema, {
    code: AdminErrorCode.NotFailed,
    ...key,
    status: row.status === 'failed' ? 'gone' : row.status,
  });
}
