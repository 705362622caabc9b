/**
 * The gauges' statements, one round trip each, built once per schema. The schema is the only
 * identifier spliced in, validated and quoted by core's `quoteIdentifier`; values go as
 * parameters. Each statement is cheap on a large table: a catalog read, and index-ordered
 * `LIMIT 1` / bounded scans through the indexes core's migrations create.
 */
export function gaugeSql(quotedSchema: string) {
  const inbox = `${quotedSchema}.inbox`;
  const outbox = `${quotedSchema}.outbox`;
  return Object.freeze({
    /** The inbox table's name, as `to_regclass` reads it ($1 of `inbox`). */
    inboxRegclass: inbox,
    /**
     * Row estimate (reltuples is -1 before the first ANALYZE: reported as 0) and the age in
     * seconds of the oldest expired row (min over inbox_expires_at_idx), NULL when none.
     */
    inbox: `SELECT
        (SELECT greatest(reltuples, 0)::float8 FROM pg_class WHERE oid = to_regclass($1)) AS rows,
        (SELECT extract(epoch FROM now() - min(expires_at))::float8 FROM ${inbox} WHERE expires_at < now()) AS purge_lag_s`,
    /**
     * Pending rows counted up to $1 (through outbox_pending_idx), and the age in seconds of the
     * oldest pending row (the first by seq), NULL when none.
     */
    outbox: `SELECT
        (SELECT count(*)::int FROM (SELECT 1 FROM ${outbox} WHERE status = 'pending' LIMIT $1) AS p) AS pending,
        (SELECT extract(epoch FROM now() - created_at)::float8 FROM ${outbox}
          WHERE status = 'pending' ORDER BY seq LIMIT 1) AS lag_s`,
  });
}

export type GaugeSql = ReturnType<typeof gaugeSql>;
