import { quoteIdentifier } from '@once/core';

/**
 * Every statement the CLI runs, built once per schema. The schema name is the only identifier
 * spliced in, validated and quoted by core's `quoteIdentifier`; every value is a parameter.
 * Counts are cast to float8 so they arrive as numbers (pg returns bigint as a string).
 */
export function cliSql(schemaName: string) {
  const schema = quoteIdentifier(schemaName, '--schema');
  const inbox = `${schema}.inbox`;
  const outbox = `${schema}.outbox`;
  // The relay publishes a row under message_id when set, else its UUID; operators may quote either.
  // The CASE keeps a non-UUID string away from the cast.
  const byMessageId = `id = CASE WHEN $1 ~* '^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$' THEN $1::uuid END OR message_id = $1`;
  return Object.freeze({
    /** Fails with 3F000/42P01 when the schema is not installed. */
    schemaVersion: `SELECT coalesce(max(version), 0)::int AS version FROM ${schema}.schema_version`,

    /** One row per consumer; ages come from the server's clock, not the CLI's. */
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
     * $1 consumer, $2 message id. Every column, so columns a later schema version adds (lease
     * mode's owner and lease_until, from version 3) show without the CLI naming them.
     */
    inspect: `SELECT * FROM ${inbox} WHERE consumer = $1 AND message_id = $2`,

    /** $1 {@link stepsRelation}. Whether lease mode's steps table exists (schema version 3 on). */
    hasSteps: 'SELECT to_regclass($1) IS NOT NULL AS found',
    /** The steps table's qualified name, a parameter of {@link hasSteps}. */
    stepsRelation: `${schema}.steps`,

    /** $1 consumer, $2 message id. Only when {@link hasSteps}. */
    steps: `SELECT step, seq, attempt, result, recorded_at FROM ${schema}.steps
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
     * of this id waits until the body has been saved and the row deleted.
     */
    lockRow: `SELECT status, body, body_truncated, origin FROM ${inbox}
      WHERE consumer = $1 AND message_id = $2 FOR UPDATE`,

    /**
     * $1 consumer, $2 message id. The next delivery of the id is then processed afresh. Lease
     * mode's recorded steps go with the row (ON DELETE CASCADE).
     */
    deleteFailed: `DELETE FROM ${inbox} WHERE consumer = $1 AND message_id = $2 AND status = 'failed'`,

    /**
     * $1 consumer, $2 message id. A discarded failure becomes `done` (error and body kept for
     * the record), so later deliveries of the id are acked as duplicates, never run.
     */
    discardFailed: `UPDATE ${inbox} SET status = 'done'
      WHERE consumer = $1 AND message_id = $2 AND status = 'failed'`,

    /** Rows a purge would delete now. */
    expiredCount: `SELECT count(*)::float8 AS n FROM ${inbox} WHERE expires_at < now()`,

    /** $1 outbox message id: the row's UUID, or the message id it was enqueued with. */
    outboxFind: `SELECT coalesce(message_id, id::text) AS id, status, destination FROM ${outbox} WHERE ${byMessageId}`,

    /** $1 outbox message id (as outboxFind). Back to pending, due now, with a fresh attempt budget. */
    outboxRetryOne: `UPDATE ${outbox} SET status = 'pending', attempts = 0, available_at = now()
      WHERE (${byMessageId}) AND status = 'failed'`,

    /**
     * $1 destination, $2 key, $3 body, $4 headers json, $5 message id. A republished failed
     * message, written in the retry's transaction: it is sent if and only if the failed record's
     * deletion commits. Mirrors core's outbox enqueue.
     */
    republish: `INSERT INTO ${outbox} (destination, key, body, headers, message_id)
      VALUES ($1, $2, $3, $4::jsonb, $5) RETURNING id::text AS row_id`,

    /** Every parked row back to pending. */
    outboxRetryAll: `UPDATE ${outbox} SET status = 'pending', attempts = 0, available_at = now()
      WHERE status = 'failed'`,

    /**
     * $1 channel. Wakes relays at once instead of at their next poll. The channel name is
     * core's `once_outbox_<schema>` (see core's sql/outbox.ts).
     */
    notify: `SELECT pg_notify($1, '')`,
  });
}

/** The statements of one schema. */
export type CliSql = ReturnType<typeof cliSql>;

/** The relays' LISTEN channel of a schema's outbox (mirrors core's `outboxChannel`). */
export function outboxChannelOf(schemaName: string): string {
  return `once_outbox_${schemaName}`;
}
