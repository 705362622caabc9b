/**
 * PostgreSQL 15 keeps a backend's statistics (pg_stat_wal, pg_statio_*, the backends' buffer
 * writes) pending for up to 10 s after it goes idle, and flushes them at most once a second while
 * it is busy, so a short run's counters could land in a later run's reading. This makes all
 * `connections` of `pool` flush theirs: each runs `pg_stat_force_next_flush()`, and the flush
 * happens as the statement ends. It takes every connection at once, so it stalls whoever else
 * uses the pool: only between runs.
 */
export async function flushStats(pool, connections = pool.options.max) {
  const clients = await Promise.all(Array.from({ length: connections }, () => pool.connect()));
  try {
    await Promise.all(clients.map((c) => c.query('SELECT pg_stat_force_next_flush()')));
  } finally {
    for (const c of clients) c.release();
  }
}

/**
 * The server settings that decide what a large inbox costs (docs/history/benchmarks-issue-14.md, "Sixth round"),
 * as `{ name: value }`, for a bench's results file. `pool`: anything with `query`.
 */
export async function serverSettings(pool) {
  const { rows } = await pool.query(
    `SELECT name, current_setting(name) AS value FROM pg_settings
      WHERE name IN ('shared_buffers', 'max_wal_size', 'checkpoint_timeout', 'wal_compression', 'server_version')`,
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.value]));
}
