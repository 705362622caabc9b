import type { FingerprintHex } from '../message/fingerprint.js';
import type { IsolationLevel } from './isolation.js';
import { byteaHexLiteral, integerLiteral, quoteLiteral } from './literal.js';

/**
 * A one-row source that turns synchronous_commit on for the statement's own transaction. An
 * autocommit statement is a transaction of its own, and `set_config(..., true)` lasts until it
 * ends, COMMIT included: so a single round trip commits flushed, whatever the session's or the
 * server's default. Used by every autocommit write the broker is settled on (failed records,
 * start counts): an unflushed commit lost in a crash would let a settled message vanish.
 */
export const PIN_SYNC_COMMIT = "(SELECT set_config('synchronous_commit', 'on', true)) AS pin";

/**
 * One purge step: deletes up to `limit` (a validated whole number) expired rows of `table`, the
 * oldest first, and returns one row: `n` the rows deleted, `last_us` the latest `expires_at` among
 * them in microseconds since the epoch (text), which the next step passes back as `fromUs`.
 * - The next step starts its expiry-index scan there (keyset), not at the index's start: the
 *   entries of the rows already deleted stay in the index until VACUUM, and a scan from the start
 *   walks all of them again, so every step would cost more than the last (12–35 ms for 1,000
 *   rows after 1.3 million deleted, on the bench machine). One microsecond is taken off, so rows
 *   that share the boundary's expiry are seen again; a row skipped because it was locked waits
 *   for the next purge run.
 * - SKIP LOCKED lets two purgers and live consumers share the table.
 * - The rows are deleted by their physical address (ctid, stable while this statement holds their
 *   row locks), so the purge never walks the primary key: on an inbox whose key is larger than
 *   shared_buffers, those lookups read pages the live consumers need out of the cache.
 * - With `steps` (the inbox's purge), the same statement deletes lease mode's durable steps of
 *   the deleted rows marked `has_steps` ({@link deleteSteps}): a primary-key probe of the steps
 *   table per such row, none for the others, where the foreign key's ON DELETE CASCADE (dropped
 *   by migration 9) ran a query per deleted row, steps or none.
 * - The step commits without waiting for its WAL flush (synchronous_commit off for its own
 *   transaction): a purge settles nothing, and a step lost in a crash leaves expired rows for the
 *   next run. Never used where a broker is settled.
 */
function purgeStep(table: string, limit: number, fromUs: number | undefined, steps?: string): string {
  const from =
    fromUs === undefined
      ? "'-infinity'::timestamptz"
      : `('epoch'::timestamptz + ${integerLiteral(Math.max(0, fromUs - 1))} * interval '1 microsecond')`;
  // The inbox's purge returns the deleted rows' keys for the steps delete that follows.
  const returning = steps === undefined ? 'expires_at' : 'consumer, message_id, has_steps, expires_at';
  const alsoSteps = steps === undefined ? '' : `,\n    ${deleteSteps(steps, 'doomed', 'has_steps')}`;
  return `WITH pin AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS off),
    doomed AS (DELETE FROM ${table} WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM ${table} WHERE expires_at >= ${from} AND expires_at < now()
        ORDER BY expires_at LIMIT ${integerLiteral(limit)} FOR UPDATE SKIP LOCKED))
      RETURNING ${returning})${alsoSteps}
    SELECT count(*)::int AS n, (extract(epoch FROM max(expires_at)) * 1000000)::bigint::text AS last_us
    FROM doomed, pin`;
}

/**
 * A data-modifying CTE, `gone_steps`, that deletes the lease-mode steps of the inbox rows another
 * CTE of the same statement deleted (`deleted`, returning `consumer, message_id`, and `flag` when
 * given: then only the rows where it is true are looked up); it returns one row per step
 * deleted. Every statement that deletes inbox rows includes it, so a message's steps go with its
 * row, in its transaction: from schema version 9 no foreign key cascades (migration 9). Purge
 * passes `has_steps` (set by the step record that inserts a row's first step, true on rows older
 * than version 9); the single-row deletes of the admin API look up every row they delete.
 *
 * It reads the steps as of the statement's snapshot. A row whose status is `done` or `failed` in
 * that snapshot gets no more steps (only the holder of an `in_progress` lease records them), so
 * the admin deletes take all of them. Purge also deletes an expired `in_progress` row (a message
 * that outlived its retention): a step its holder records between the purge's snapshot and the
 * purge's lock of the row is left behind, and the next fresh claim of the id deletes it.
 */
export function deleteSteps(steps: string, deleted: string, flag?: string): string {
  const only = flag === undefined ? '' : `d.${flag} AND `;
  return `gone_steps AS (DELETE FROM ${steps} AS s USING ${deleted} AS d
      WHERE ${only}s.consumer = d.consumer AND s.message_id = d.message_id RETURNING 1)`;
}

/**
 * A one-row source that pins a message transaction's settings for the rest of it, as SET LOCAL
 * would: synchronous_commit on (a user's asynchronous-commit default must never let us settle on
 * an unflushed commit) and the lock timeout in ms (a validated number).
 */
function pinSettings(lockTimeoutMs: number): string {
  return `(SELECT set_config('synchronous_commit', 'on', true), set_config('lock_timeout', '${Math.floor(lockTimeoutMs)}', true)) AS pin`;
}

/** BEGIN at `isolation`, then the message transaction's settings pinned with SET LOCAL. */
function beginPinned(isolation: IsolationLevel, lockTimeoutMs: number): string {
  return `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}; SET LOCAL synchronous_commit = on; SET LOCAL lock_timeout = ${Math.floor(lockTimeoutMs)}`;
}

/**
 * Every statement core runs against the inbox, built once per schema. The schema is the only
 * identifier spliced in, and it has been validated and quoted by `quoteIdentifier`; all values
 * go as parameters, except in `beginAndClaim` (see literal.ts). Numbers come from validated options.
 */
export function inboxSql(schema: string) {
  const inbox = `${schema}.inbox`;
  const cols = 'message_id, status, fingerprint, result';
  return Object.freeze({
    /**
     * One round trip opens the transaction and pins its settings. synchronous_commit=on: a
     * user's asynchronous-commit default must never let us settle on an unflushed commit.
     */
    begin: beginPinned,
    /**
     * BEGIN, the transaction's settings (synchronous_commit on, the lock timeout: SET LOCAL, before
     * the insert can wait) and the single-message claim in one round trip (a simple query, so the
     * values are literals: see literal.ts). The claim is a plain `INSERT … VALUES`: PostgreSQL plans
     * it for less than an `INSERT … SELECT` from a one-row source that pins the settings with
     * `set_config`, the form used before (about 25 µs less backend CPU per message, measured
     * interleaved; docs/benchmarks.md). The last result's rowCount is 1 when claimed.
     */
    beginAndClaim: (isolation: IsolationLevel, lockTimeoutMs: number) => {
      const begin = beginPinned(isolation, lockTimeoutMs);
      return (consumer: string, id: string, fpHex: FingerprintHex, retentionMs: number): string =>
        `${begin}; INSERT INTO ${inbox} (consumer, message_id, fingerprint, status, expires_at) VALUES (${quoteLiteral(consumer)}, ${quoteLiteral(id)}, ${byteaHexLiteral(fpHex)}, 'done', now() + ${Math.floor(retentionMs)} * interval '1 millisecond') ON CONFLICT DO NOTHING`;
    },
    /**
     * BEGIN and a batch's claim in one round trip, as {@link beginAndClaim} for many ids: `ids`
     * sorted (so overlapping batches lock in one order, kept by ORDER BY the position), `fpHexes` their
     * fingerprints. The settings are pinned before the first row is inserted: the sort reads the
     * whole source, the pin included, before the insert sees a row. Returns the claimed ids.
     */
    beginAndClaimMany: (isolation: IsolationLevel, lockTimeoutMs: number) => {
      const begin = `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}`;
      const pin = pinSettings(lockTimeoutMs);
      return (
        consumer: string,
        ids: readonly string[],
        fpHexes: readonly FingerprintHex[],
        retentionMs: number,
      ): string =>
        `${begin}; INSERT INTO ${inbox} (consumer, message_id, fingerprint, status, expires_at) SELECT ${quoteLiteral(consumer)}, t.m, t.f, 'done', now() + ${Math.floor(retentionMs)} * interval '1 millisecond' FROM ${pin}, unnest(ARRAY[${ids.map(quoteLiteral).join(', ')}]::text[], ARRAY[${fpHexes.map(byteaHexLiteral).join(', ')}]::bytea[]) WITH ORDINALITY AS t(m, f, n) ORDER BY t.n ON CONFLICT DO NOTHING RETURNING message_id`;
    },
    /** $1 consumer, $2 id, $3 fingerprint, $4 retention ms. A rival's uncommitted row makes this wait. */
    claimOne: `INSERT INTO ${inbox} (consumer, message_id, fingerprint, status, expires_at)
      VALUES ($1, $2, $3, 'done', now() + $4 * interval '1 millisecond') ON CONFLICT DO NOTHING`,
    /**
     * The single-message claim in a transaction once did not open (`options.transactions`), with
     * the settings {@link begin} would have pinned, in one statement with parameters (a library's
     * raw-SQL call runs one statement): synchronous_commit on, and $5 the lock timeout in ms, as
     * text, set before the insert can wait. Returns the claimed row, for raw-SQL calls that report
     * rows but no count. $1 consumer, $2 id, $3 fingerprint, $4 retention ms.
     */
    claimOwned: `INSERT INTO ${inbox} (consumer, message_id, fingerprint, status, expires_at)
      SELECT $1, $2, $3, 'done', now() + $4 * interval '1 millisecond'
      FROM (SELECT set_config('synchronous_commit', 'on', true), set_config('lock_timeout', $5, true)) AS pin
      ON CONFLICT DO NOTHING RETURNING message_id`,
    readOne: `SELECT ${cols} FROM ${inbox} WHERE consumer = $1 AND message_id = $2`,
    readMany: `SELECT ${cols} FROM ${inbox} WHERE consumer = $1 AND message_id = ANY($2::text[])`,
    /** $1 consumer, $2 id, $3 result json. */
    storeResult: `UPDATE ${inbox} SET result = $3::jsonb WHERE consumer = $1 AND message_id = $2`,
    storeResults: `UPDATE ${inbox} AS i SET result = t.r FROM unnest($2::text[], $3::jsonb[]) AS t(m, r)
      WHERE i.consumer = $1 AND i.message_id = t.m`,
    /**
     * $1 consumer, $2 id, $3 fingerprint, $4 retention ms, $5 error, $6 body, $7 truncated, $8
     * attempts, $9 origin. An autocommit write that the broker is settled on: it pins
     * synchronous_commit itself (see {@link PIN_SYNC_COMMIT}).
     */
    recordFailed: `INSERT INTO ${inbox}
      (consumer, message_id, fingerprint, status, expires_at, error, body, body_truncated, attempts, origin)
      SELECT $1, $2, $3, 'failed', now() + $4 * interval '1 millisecond', $5::jsonb, $6, $7, $8, $9::jsonb
      FROM ${PIN_SYNC_COMMIT}
      ON CONFLICT DO NOTHING RETURNING message_id, current_setting('synchronous_commit') AS synchronous_commit`,
    /** Savepoint batches: turn a held claim into a failed record. $1 consumer, $2 id, $3 error, $4 body, $5 truncated, $6 attempts, $7 origin. */
    markFailed: `UPDATE ${inbox} SET status = 'failed', error = $3::jsonb, body = $4, body_truncated = $5, attempts = $6,
        origin = $7::jsonb
      WHERE consumer = $1 AND message_id = $2`,
    /**
     * Drop claims of messages that did not run, with any steps of their ids ({@link deleteSteps}:
     * a transactional claim records none, but every delete of inbox rows takes them). $1
     * consumer, $2 ids.
     */
    unclaim: `WITH unclaimed AS (DELETE FROM ${inbox} WHERE consumer = $1 AND message_id = ANY($2::text[])
        RETURNING consumer, message_id),
      ${deleteSteps(`${schema}.steps`, 'unclaimed')}
      SELECT count(*)::int AS n FROM unclaimed`,
    /** One small purge step of expired inbox rows and their steps: see {@link purgeStep}. */
    purgeStep: (limit: number, fromUs: number | undefined) =>
      purgeStep(inbox, limit, fromUs, `${schema}.steps`),
    /** Counts a start, committed on its own. $1 consumer, $2 id, $3 retention ms. Returns the count. */
    noteStart: `INSERT INTO ${schema}.starts AS s (consumer, message_id, starts, expires_at)
      SELECT $1, $2, 1, now() + $3 * interval '1 millisecond' FROM ${PIN_SYNC_COMMIT}
      ON CONFLICT (consumer, message_id) DO UPDATE SET starts = s.starts + 1, expires_at = EXCLUDED.expires_at
      RETURNING starts`,
    /** Takes one counted start back. $1 consumer, $2 id. */
    forgetStart: `UPDATE ${schema}.starts SET starts = starts - 1
      WHERE consumer = $1 AND message_id = $2 AND starts > 0`,
    /**
     * Notes the last offset of the range a consumer is about to run on a partition, committed on
     * its own and flushed before the range runs (see {@link PIN_SYNC_COMMIT}). $1 consumer, $2
     * stream, $3 partition, $4 end offset (decimal text). Returns the statement's synchronous_commit.
     */
    noteInflight: `INSERT INTO ${schema}.inflight AS f (consumer, stream, partition, end_offset, noted_at)
      SELECT $1, $2, $3, $4::bigint, now() FROM ${PIN_SYNC_COMMIT}
      ON CONFLICT (consumer, stream, partition) DO UPDATE SET end_offset = EXCLUDED.end_offset, noted_at = EXCLUDED.noted_at
      RETURNING current_setting('synchronous_commit') AS synchronous_commit`,
    /** The noted end of a partition's range, as text. $1 consumer, $2 stream, $3 partition. */
    inflightEnd: `SELECT end_offset::text AS end_offset FROM ${schema}.inflight
      WHERE consumer = $1 AND stream = $2 AND partition = $3`,
    /** One small purge step of expired start counts: see {@link purgeStep}. */
    purgeStartsStep: (limit: number, fromUs: number | undefined) =>
      purgeStep(`${schema}.starts`, limit, fromUs),
    schemaVersion: `SELECT max(version) AS version FROM ${schema}.schema_version`,
  });
}

export type InboxSql = ReturnType<typeof inboxSql>;

/** Statements of the migration runner. */
export function migrationSql(schema: string) {
  return Object.freeze({
    createSchema: `CREATE SCHEMA IF NOT EXISTS ${schema}`,
    // compatible_from: the oldest code version that runs on the schema once this row's migration
    // is applied; removes: what a contract migration removed (NULL when it only expands). Both
    // are NULL on rows written before @once/core recorded them.
    createVersionTable: `CREATE TABLE IF NOT EXISTS ${schema}.schema_version (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
      compatible_from integer, removes text)`,
    /** How many of the two compatibility columns a version table has (0 when an older release made it). */
    compatibilityColumns: `SELECT count(*)::int AS n FROM pg_attribute
      WHERE attrelid = '${schema}.schema_version'::regclass AND attname IN ('compatible_from', 'removes')
        AND NOT attisdropped`,
    /** Adds them to a version table an older release made; only run when they are missing. */
    addCompatibilityColumns: `ALTER TABLE ${schema}.schema_version
      ADD COLUMN IF NOT EXISTS compatible_from integer, ADD COLUMN IF NOT EXISTS removes text`,
    /** Fills them on rows an older release wrote: $1 versions, $2 compatible_from, $3 removes. */
    fillCompatibility: `UPDATE ${schema}.schema_version AS s SET compatible_from = k.compatible_from, removes = k.removes
      FROM unnest($1::int[], $2::int[], $3::text[]) AS k(version, compatible_from, removes)
      WHERE s.version = k.version AND s.compatible_from IS NULL`,
    currentVersion: `SELECT coalesce(max(version), 0) AS version FROM ${schema}.schema_version`,
    /**
     * The version, and how many rows lack their compatibility (fails on a version table made
     * before the columns existed): migrate()'s read-only check of a current schema.
     */
    currentAndUnfilled: `SELECT coalesce(max(version), 0) AS version,
      count(*) FILTER (WHERE compatible_from IS NULL)::int AS unfilled FROM ${schema}.schema_version`,
    recordVersion: `INSERT INTO ${schema}.schema_version (version, name, compatible_from, removes)
      VALUES ($1, $2, $3, $4)`,
    /**
     * What the newest row says about the code that runs on the schema, and the first migration
     * that left code of version $1 behind (NULL when none did).
     */
    compatibility: `SELECT l.compatible_from, c.version AS cut_version, c.name AS cut_name, c.removes AS cut_removes
      FROM (SELECT compatible_from FROM ${schema}.schema_version ORDER BY version DESC LIMIT 1) AS l
      LEFT JOIN LATERAL (SELECT version, name, removes FROM ${schema}.schema_version
        WHERE compatible_from > $1 ORDER BY version LIMIT 1) AS c ON true`,
    /** Serialises migrate() across processes: $1, $2 are the two halves of the lock key. */
    lock: 'SELECT pg_advisory_xact_lock($1::int, $2::int)',
  });
}
