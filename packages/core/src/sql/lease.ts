import type { IsolationLevel } from './isolation.js';

/**
 * Every statement of lease mode, built once per schema. The schema is the only identifier
 * spliced in, validated and quoted by `quoteIdentifier`; all values go as parameters. Every
 * comparison of time uses the database's `now()`, so workers never compare their own clocks.
 *
 * Fencing: each write after the claim carries `owner = $me` in its WHERE clause and is an
 * UPDATE of the inbox row, so it takes that row's lock. A takeover also updates the row, so the
 * two are serialised: whichever commits second re-reads the row (READ COMMITTED re-evaluation)
 * and finds the other's owner.
 *
 * Durability: the claim and `ctx.tx` pin `synchronous_commit = on` in their BEGIN round trip. The
 * writes sent on their own (autocommit: step records, renewals, release, done without `ctx.tx`,
 * fail) pin it inside the statement: `set_config(..., true)` lasts to the end of the statement's
 * own transaction, and PostgreSQL writes and flushes the commit record before it resets settings.
 * So a server or session with `synchronous_commit = off` still flushes each of them before the
 * statement returns, before a step's next effect runs or the broker is settled. The guard sits in
 * the fencing WHERE clause: a pseudo-constant, evaluated before any row is written.
 */
export function leaseSql(schema: string) {
  const inbox = `${schema}.inbox`;
  const steps = `${schema}.steps`;
  const ms = "* interval '1 millisecond'";
  const mine = `consumer = $1 AND message_id = $2 AND owner = $3 AND status = 'in_progress'`;
  // See "Durability" above; set_config returns the value it set.
  const pinned = `${mine} AND (SELECT set_config('synchronous_commit', 'on', true)) = 'on'`;
  return Object.freeze({
    /**
     * Opens a transaction with a bounded lock wait: the claim's (READ COMMITTED whatever the
     * inbox's `isolation`: its ON CONFLICT re-check needs it), or the handler's `ctx.tx`.
     * Numbers and the level come from validated options.
     */
    begin: (isolation: IsolationLevel, lockTimeoutMs: number) =>
      `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}; SET LOCAL synchronous_commit = on; SET LOCAL lock_timeout = ${Math.floor(lockTimeoutMs)}`,
    /**
     * The claim: a new row, or a takeover of an `in_progress` row that nobody holds (released,
     * or its lease expired). A takeover counts an attempt. Returns no row when the id is done,
     * failed, leased by a live worker, or (unless $7) has another fingerprint. `took_over` says
     * the row had an owner before (its lease ran out): read from the statement's snapshot, so a
     * race can misreport it; it feeds only the `lease:takeover` event, never a decision.
     * `fresh` says the claim inserted the row (a first attempt: `attempts` is 1 only then, a
     * takeover adds one to at least 1). A fresh claim deletes, in the same statement, any steps
     * recorded under the id before: they belong to an inbox row that is gone (purged or deleted
     * by code that left them, see migration 9), so no earlier attempt of this row recorded them
     * and they must not be replayed. The delete is skipped (a one-time filter) on a takeover, and
     * on a fresh claim it is one probe of the steps' primary key; a fresh claim has no steps to
     * read after it. $1 consumer, $2 id, $3 fingerprint, $4 owner, $5 lease ms, $6 retention ms,
     * $7 ignore fingerprint.
     */
    claim: `WITH prior AS (SELECT owner FROM ${inbox} WHERE consumer = $1 AND message_id = $2),
      claimed AS (INSERT INTO ${inbox} AS i
        (consumer, message_id, fingerprint, status, owner, lease_until, expires_at, attempts)
      VALUES ($1, $2, $3, 'in_progress', $4, now() + $5 ${ms}, now() + $6 ${ms}, 1)
      ON CONFLICT (consumer, message_id) DO UPDATE
        SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until, attempts = i.attempts + 1
        WHERE i.status = 'in_progress' AND (i.owner IS NULL OR i.lease_until <= now())
          AND (i.fingerprint = EXCLUDED.fingerprint OR $7::boolean)
      RETURNING attempts),
      stale AS (DELETE FROM ${steps} WHERE consumer = $1 AND message_id = $2
        AND EXISTS (SELECT 1 FROM claimed WHERE attempts = 1))
      SELECT attempts, attempts = 1 AS fresh, EXISTS (SELECT 1 FROM prior WHERE owner IS NOT NULL) AS took_over
      FROM claimed`,
    /** The row a claim did not get, with the time its lease has left (ms, by the database clock). */
    read: `SELECT status, fingerprint, result, owner,
        greatest(0, extract(epoch FROM (lease_until - now())) * 1000)::float8 AS lease_left_ms
      FROM ${inbox} WHERE consumer = $1 AND message_id = $2`,
    /** Recorded steps of an id, results as JSON text (SQL NULL: the step returned undefined). $1 consumer, $2 id. */
    readSteps: `SELECT step, result::text AS json FROM ${steps} WHERE consumer = $1 AND message_id = $2`,
    /** Lease renewal (heartbeat, step start). $1 consumer, $2 id, $3 owner, $4 lease ms. */
    renew: `UPDATE ${inbox} SET lease_until = now() + $4 ${ms} WHERE ${pinned}`,
    /**
     * Records a step's result, fenced, and renews the lease in the same statement. `owned` 0:
     * the lease was taken over; `recorded` 0 with `owned` 1: the step was already recorded.
     * Marks the row `has_steps` (schema version 9), so purge deletes its steps with it.
     * $1 consumer, $2 id, $3 owner, $4 lease ms, $5 step, $6 seq, $7 attempt, $8 result json.
     */
    recordStep: `WITH lease AS (
        UPDATE ${inbox} SET lease_until = now() + $4 ${ms}, has_steps = true WHERE ${pinned}
        RETURNING consumer, message_id),
      ins AS (
        INSERT INTO ${steps} (consumer, message_id, step, seq, attempt, result)
        SELECT consumer, message_id, $5, $6, $7, $8::jsonb FROM lease
        ON CONFLICT DO NOTHING RETURNING 1)
      SELECT (SELECT count(*) FROM lease)::int AS owned, (SELECT count(*) FROM ins)::int AS recorded`,
    /** Gives the id back after a transient failure, so a redelivery claims it at once. $1 consumer, $2 id, $3 owner. */
    release: `UPDATE ${inbox} SET owner = NULL, lease_until = NULL WHERE ${pinned}`,
    /** Marks the id done, fenced; run inside the handler's transaction when it used ctx.tx. $4 result json, $5 retention ms. */
    done: `UPDATE ${inbox} SET status = 'done', owner = NULL, lease_until = NULL, result = $4::jsonb,
        expires_at = now() + $5 ${ms}
      WHERE ${pinned}`,
    /**
     * `done` for `@once/http`'s keys: the response stored with it, in the same statement (so
     * no reader sees the key done without its response). $4 result json, $5 retention ms, $6
     * response status, $7 headers json, $8 body.
     */
    doneWithResponse: `UPDATE ${inbox} SET status = 'done', owner = NULL, lease_until = NULL, result = $4::jsonb,
        expires_at = now() + $5 ${ms}, response_status = $6, response_headers = $7::jsonb, response_body = $8
      WHERE ${pinned}`,
    /** Records a permanent failure, fenced. $4 error json, $5 body, $6 truncated, $7 retention ms, $8 origin. */
    fail: `UPDATE ${inbox} SET status = 'failed', owner = NULL, lease_until = NULL, error = $4::jsonb,
        body = $5, body_truncated = $6, expires_at = now() + $7 ${ms}, origin = $8::jsonb
      WHERE ${pinned}`,
  });
}

export type LeaseSql = ReturnType<typeof leaseSql>;
