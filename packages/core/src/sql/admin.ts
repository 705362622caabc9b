import { deleteSteps } from './inbox.js';

/**
 * The most inbox rows a gauge read counts while the table was never analysed (reltuples -1):
 * a bounded scan, and only until autovacuum (or an ANALYZE) gives PostgreSQL its estimate.
 */
export const UNANALYSED_COUNT_CAP = 10_000;

/**
 * Every statement of the admin API (`@once/core/admin`): what the CLI and the metrics read and
 * change. `schema` is validated and quoted by `quoteIdentifier`; values go as parameters. Counts
 * are cast to float8 so they arrive as numbers (pg returns bigint as a string). The schema
 * version, the outbox insert and the wake-up are the migration runner's and the outbox's own
 * statements, not repeated here.
 */
export function adminSql(schema: string) {
  const inbox = `${schema}.inbox`;
  const outbox = `${schema}.outbox`;
  const steps = `${schema}.steps`;
  const starts = `${schema}.starts`;
  // The relay publishes a row under message_id when set, else its UUID; operators may quote either.
  // The CASE keeps a non-UUID string away from the cast.
  const byMessageId = `id = CASE WHEN $1 ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$' THEN $1::uuid END OR message_id = $1`;
  return Object.freeze({
    begin: 'BEGIN',
    commit: 'COMMIT',
    rollback: 'ROLLBACK',
    /** The database's clock. */
    now: 'SELECT now() AS now',

    /** One row per consumer; ages come from the server's clock, not the caller's. */
    inboxByConsumer: `SELECT consumer,
        count(*)::float8 AS total,
        count(*) FILTER (WHERE status = 'done')::float8 AS done,
        count(*) FILTER (WHERE status = 'failed')::float8 AS failed,
        count(*) FILTER (WHERE status = 'in_progress')::float8 AS in_progress,
        count(*) FILTER (WHERE expires_at < now())::float8 AS expired,
        min(created_at) AS oldest_at,
        extract(epoch FROM now() - min(created_at))::float8 AS oldest_age_s
      FROM ${inbox} GROUP BY consumer ORDER BY consumer`,

    /** One row per destination. */
    outboxByDestination: `SELECT destination,
        count(*) FILTER (WHERE status = 'pending')::float8 AS pending,
        count(*) FILTER (WHERE status = 'sent')::float8 AS sent,
        count(*) FILTER (WHERE status = 'failed')::float8 AS failed,
        min(created_at) FILTER (WHERE status = 'pending') AS oldest_pending_at,
        extract(epoch FROM now() - min(created_at) FILTER (WHERE status = 'pending'))::float8
          AS oldest_pending_age_s
      FROM ${outbox} GROUP BY destination ORDER BY destination`,

    /** $1 consumer. Walks the primary key's prefix. */
    consumerExists: `SELECT EXISTS (SELECT 1 FROM ${inbox} WHERE consumer = $1) AS found`,

    /**
     * $1 consumer, $2 message id. Every column, so columns of later schema versions (lease
     * mode's owner and lease_until from version 3, origin from 5) show on the versions that have them.
     */
    inboxRow: `SELECT * FROM ${inbox} WHERE consumer = $1 AND message_id = $2`,

    /** $1 {@link stepsRelation}. Whether lease mode's steps table exists (schema version 3 on). */
    hasSteps: 'SELECT to_regclass($1) IS NOT NULL AS found',
    /** The steps table's qualified name, a parameter of {@link hasSteps}. */
    stepsRelation: steps,

    /** $1 consumer, $2 message id. Only when {@link hasSteps}. */
    steps: `SELECT step, seq, attempt, result, recorded_at FROM ${steps}
      WHERE consumer = $1 AND message_id = $2 ORDER BY seq, step`,

    /** $1 consumer or null for all, $2 limit. Served by the partial index on failed rows. */
    failedList: `SELECT consumer, message_id, attempts, error, created_at, expires_at,
        octet_length(body)::float8 AS body_bytes, body_truncated
      FROM ${inbox} WHERE status = 'failed' AND ($1::text IS NULL OR consumer = $1)
      ORDER BY consumer, created_at, message_id LIMIT $2`,

    /** $1 consumer or null for all. */
    failedCount: `SELECT count(*)::float8 AS n FROM ${inbox}
      WHERE status = 'failed' AND ($1::text IS NULL OR consumer = $1)`,

    /**
     * $1 consumer, $2 message id. Locks the row for the retry transaction: a consumer's claim
     * of this id waits until the retry commits or rolls back. With when the failure was recorded
     * and the database's clock, for a republish that must wait out a broker's dedup window.
     */
    lockRow: `SELECT status, body, body_truncated, origin, created_at, now() AS now FROM ${inbox}
      WHERE consumer = $1 AND message_id = $2 FOR UPDATE`,

    /**
     * $1 consumer, $2 message id. The next delivery of the id is then processed afresh. Lease
     * mode's recorded steps go with the row, in the same statement ({@link deleteSteps}).
     */
    deleteFailed: `WITH gone AS (
        DELETE FROM ${inbox} WHERE consumer = $1 AND message_id = $2 AND status = 'failed'
        RETURNING consumer, message_id),
      ${deleteSteps(steps, 'gone')}
      SELECT count(*)::int AS removed FROM gone`,

    /**
     * $1 consumer, $2 message id. A discarded failure becomes `done` (error and body kept for
     * the record), so later deliveries of the id are acked as duplicates, never run.
     */
    discardFailed: `UPDATE ${inbox} SET status = 'done'
      WHERE consumer = $1 AND message_id = $2 AND status = 'failed'`,

    /**
     * Forget one processed id, so its next delivery is processed afresh. $1 consumer, $2 message
     * id, $3 also when it has recorded steps (lease mode; they go with it, {@link deleteSteps}).
     * Only a `done` row: a failed row keeps its body for `retryFailed`, and an `in_progress` row
     * is a live lease whose holder is still running. Its start count (`Inbox.noteStart`) goes
     * too, so the next delivery starts counting from zero. A single statement: a consumer's claim
     * of the id that arrives meanwhile waits on the deleted row, and inserts once this commits.
     * Returns one row: `removed` (0 or 1), `steps` deleted with it.
     */
    forgetOne: `WITH gone AS (
        DELETE FROM ${inbox} AS i WHERE i.consumer = $1 AND i.message_id = $2 AND i.status = 'done'
          AND ($3::boolean OR NOT EXISTS (SELECT 1 FROM ${steps} AS s
            WHERE s.consumer = i.consumer AND s.message_id = i.message_id))
        RETURNING i.consumer, i.message_id),
      ${deleteSteps(steps, 'gone')},
      starts AS (DELETE FROM ${starts} AS st USING gone AS g
        WHERE st.consumer = $1 AND st.message_id = g.message_id RETURNING 1)
      SELECT (SELECT count(*) FROM gone)::int AS removed, (SELECT count(*) FROM gone_steps)::int AS steps`,

    /**
     * What {@link forgetRangeStep} would remove, counted. $1 consumer, $2 since (inclusive), $3
     * until (exclusive) or null for now. Returns the database's `now()` as `as_of`, the upper
     * bound the steps then use, so rows processed after the count are not taken.
     */
    forgetRangeCount: `SELECT now() AS as_of,
        count(*) FILTER (WHERE status = 'done' AND NOT has_steps)::float8 AS done,
        count(*) FILTER (WHERE status = 'done' AND has_steps)::float8 AS done_with_steps,
        count(*) FILTER (WHERE status = 'failed')::float8 AS failed,
        count(*) FILTER (WHERE status = 'in_progress')::float8 AS in_progress
      FROM (SELECT i.status, EXISTS (SELECT 1 FROM ${steps} AS s
          WHERE s.consumer = i.consumer AND s.message_id = i.message_id) AS has_steps
        FROM ${inbox} AS i
        WHERE i.consumer = $1 AND i.created_at >= $2 AND i.created_at < coalesce($3, now())) AS r`,

    /**
     * One batch of a range forget: up to $6 `done` rows of consumer $1 created in [$2, $3), after
     * message id $4 in key order (keyset: each batch walks the primary key on from the last, so
     * the whole range is read once), with their steps when $5 and their start counts. Candidates
     * are picked without locks and deleted by key with the conditions checked again, so a row a
     * consumer holds is waited for and then judged on what it became. `last` is the greatest
     * candidate id (the next cursor), null when there were none: the range is done.
     */
    forgetRangeStep: `WITH batch AS (
        SELECT i.message_id FROM ${inbox} AS i
        WHERE i.consumer = $1 AND i.message_id > $4 AND i.status = 'done'
          AND i.created_at >= $2 AND i.created_at < $3
          AND ($5::boolean OR NOT EXISTS (SELECT 1 FROM ${steps} AS s
            WHERE s.consumer = i.consumer AND s.message_id = i.message_id))
        ORDER BY i.message_id LIMIT $6),
      gone AS (
        DELETE FROM ${inbox} AS i USING batch AS b
        WHERE i.consumer = $1 AND i.message_id = b.message_id AND i.status = 'done'
          AND ($5::boolean OR NOT EXISTS (SELECT 1 FROM ${steps} AS s
            WHERE s.consumer = i.consumer AND s.message_id = i.message_id))
        RETURNING i.consumer, i.message_id),
      ${deleteSteps(steps, 'gone')},
      starts AS (DELETE FROM ${starts} AS st USING gone AS g
        WHERE st.consumer = $1 AND st.message_id = g.message_id RETURNING 1)
      SELECT (SELECT max(message_id) FROM batch) AS last,
        (SELECT count(*) FROM gone)::int AS removed, (SELECT count(*) FROM gone_steps)::int AS steps`,

    /** Rows a purge would delete now. */
    expiredCount: `SELECT count(*)::float8 AS n FROM ${inbox} WHERE expires_at < now()`,

    /** $1 outbox message id: the row's UUID, or the message id it was enqueued with. */
    outboxFind: `SELECT coalesce(message_id, id::text) AS id, status, destination FROM ${outbox} WHERE ${byMessageId}`,

    /** $1 outbox message id (as outboxFind). Back to pending, due now, with a fresh attempt budget. */
    outboxRetryOne: `UPDATE ${outbox} SET status = 'pending', attempts = 0, available_at = now()
      WHERE (${byMessageId}) AND status = 'failed'`,

    /** Every parked row back to pending. */
    outboxRetryAll: `UPDATE ${outbox} SET status = 'pending', attempts = 0, available_at = now()
      WHERE status = 'failed'`,

    /** The inbox table's name, as `to_regclass` reads it ($1 of {@link inboxGauges}). */
    inboxRegclass: inbox,

    /**
     * Gauges, cheap on a large table: the row estimate, and the age in seconds of the oldest
     * expired row (min over inbox_expires_at_idx), NULL when none. reltuples is -1 while the
     * table was never analysed (nor vacuumed): then the rows are counted, up to
     * {@link UNANALYSED_COUNT_CAP}, and a table that holds that many is NULL (unknown), never 0.
     * The count is an uncorrelated subquery inside CASE, so it runs only when reltuples is -1.
     */
    inboxGauges: `SELECT
        (SELECT CASE WHEN c.reltuples >= 0 THEN c.reltuples::float8
            ELSE (SELECT CASE WHEN n < ${UNANALYSED_COUNT_CAP} THEN n::float8 END
              FROM (SELECT count(*) AS n FROM (SELECT 1 FROM ${inbox} LIMIT ${UNANALYSED_COUNT_CAP}) AS l) AS k)
          END
          FROM pg_class AS c WHERE c.oid = to_regclass($1)) AS rows,
        (SELECT extract(epoch FROM now() - min(expires_at))::float8 FROM ${inbox} WHERE expires_at < now()) AS purge_lag_s`,

    /**
     * Gauges: pending rows counted up to $1 (through outbox_pending_idx), and the age in seconds
     * of the oldest pending row (the first by seq), NULL when none.
     */
    outboxGauges: `SELECT
        (SELECT count(*)::int FROM (SELECT 1 FROM ${outbox} WHERE status = 'pending' LIMIT $1) AS p) AS pending,
        (SELECT extract(epoch FROM now() - created_at)::float8 FROM ${outbox}
          WHERE status = 'pending' ORDER BY seq LIMIT 1) AS lag_s`,
  });
}

export type AdminSql = ReturnType<typeof adminSql>;
