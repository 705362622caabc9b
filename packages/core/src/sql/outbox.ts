/**
 * Every statement of the outbox and its relay. `schema` is validated and quoted by
 * `quoteIdentifier`; values go as parameters.
 */
export function outboxSql(schema: string) {
  const outbox = `${schema}.outbox`;
  return Object.freeze({
    /** $1 destination, $2 key, $3 body, $4 headers json, $5 delay ms, $6 message id or NULL. Returns the message id. */
    enqueue: `INSERT INTO ${outbox} (destination, key, body, headers, available_at, message_id)
      VALUES ($1, $2, $3, $4::jsonb, now() + $5 * interval '1 millisecond', $6)
      RETURNING coalesce(message_id, id::text) AS id`,
    /**
     * The relay's claim. Per (destination, key) only the oldest pending row is eligible, so two
     * rows of one key are never in flight at once, even across relays: SKIP LOCKED alone would
     * let a second relay take row 2 while the first still holds row 1. Rows without a key are
     * unordered. $1 batch size.
     */
    claim: `SELECT o.seq, coalesce(o.message_id, o.id::text) AS id, o.destination, o.key, o.body, o.headers, o.attempts
      FROM ${outbox} AS o
      WHERE o.status = 'pending' AND o.available_at <= now()
        AND (o.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM ${outbox} AS p
          WHERE p.status = 'pending' AND p.key = o.key AND p.destination = o.destination AND p.seq < o.seq))
      ORDER BY o.seq
      LIMIT $1
      FOR UPDATE OF o SKIP LOCKED`,
    /** $1 seqs. */
    markSent: `UPDATE ${outbox} SET status = 'sent', sent_at = now(), attempts = attempts + 1
      WHERE seq = ANY($1::bigint[])`,
    /** $1 seqs, $2 errors json, $3 delays ms, $4 park flags. */
    markFailed: `UPDATE ${outbox} AS o SET
        attempts = o.attempts + 1,
        last_error = t.e,
        available_at = now() + t.d * interval '1 millisecond',
        status = CASE WHEN t.park THEN 'failed' ELSE 'pending' END
      FROM unnest($1::bigint[], $2::jsonb[], $3::bigint[], $4::boolean[]) AS t(s, e, d, park)
      WHERE o.seq = t.s`,
    /** Sent rows older than $1 ms, $2 at a time. */
    cleanupStep: `DELETE FROM ${outbox} WHERE seq IN (
        SELECT seq FROM ${outbox} WHERE status = 'sent' AND sent_at < now() - $1 * interval '1 millisecond'
        ORDER BY sent_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    counts: `SELECT status, count(*)::int AS n FROM ${outbox} GROUP BY status`,
    /** The wake-up: sent after commit, never inside a publishing transaction. $1 channel. */
    notify: `SELECT pg_notify($1, '')`,
  });
}

/** The LISTEN/NOTIFY channel of a schema's outbox; a plain identifier since the schema name is one. */
export function outboxChannel(schemaName: string): string {
  return `once_outbox_${schemaName}`;
}
