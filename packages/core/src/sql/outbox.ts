import { createHash } from 'node:crypto';
import { quoteIdentifier } from './identifier.js';
import { bigintArrayLiteral, integerLiteral } from './literal.js';

/**
 * Every statement of the outbox and its relay. `schema` is validated and quoted by
 * `quoteIdentifier`; values go as parameters.
 */
export function outboxSql(schema: string) {
  const outbox = `${schema}.outbox`;
  const begin = 'BEGIN; SET LOCAL synchronous_commit = on';
  const claim = (
    limit: string,
  ) => `SELECT o.seq, coalesce(o.message_id, o.id::text) AS id, o.destination, o.key, o.body, o.headers, o.attempts,
        o.republish_dedup_id
      FROM ${outbox} AS o
      WHERE o.status = 'pending' AND o.available_at <= now()
        AND (o.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM ${outbox} AS p
          WHERE p.status = 'pending' AND p.key = o.key AND p.destination = o.destination AND p.seq < o.seq))
      ORDER BY o.seq
      LIMIT ${limit}
      FOR UPDATE OF o SKIP LOCKED`;
  const markSent = (
    seqs: string,
  ) => `UPDATE ${outbox} SET status = 'sent', sent_at = now(), attempts = attempts + 1
      WHERE seq = ANY(${seqs})`;
  return Object.freeze({
    /**
     * The relay's round opens with synchronous_commit pinned in the same round trip: a row is
     * marked sent only on a flushed commit, whatever the session's or server's default.
     */
    begin,
    commit: 'COMMIT',
    rollback: 'ROLLBACK',
    /**
     * $1 destination, $2 key, $3 body, $4 headers json, $5 delay ms, $6 message id or NULL.
     * Returns the message id, and the row's own UUID (`row_id`) for operators.
     */
    enqueue: `INSERT INTO ${outbox} (destination, key, body, headers, available_at, message_id)
      VALUES ($1, $2, $3, $4::jsonb, now() + $5 * interval '1 millisecond', $6)
      RETURNING coalesce(message_id, id::text) AS id, id::text AS row_id`,
    /**
     * The relay's claim. Per (destination, key) only the oldest pending row is eligible, so two
     * rows of one key are never in flight at once, even across relays and rounds: SKIP LOCKED
     * alone would let a second round take row 2 while the first still holds row 1. Rows without
     * a key are unordered. $1 batch size.
     */
    claim: claim('$1'),
    /**
     * BEGIN (with synchronous_commit pinned) and the claim of up to `limit` rows in one
     * simple-query round trip (literal.ts); the rows are in the last result.
     */
    beginAndClaim: (limit: number) => `${begin}; ${claim(integerLiteral(limit))}`,
    /**
     * A republish of a message already sent under its id: as `enqueue`, marked with $7, the
     * broker-level deduplication id to send it with (see migration 10).
     */
    enqueueRepublish: `INSERT INTO ${outbox} (destination, key, body, headers, available_at, message_id, republish_dedup_id)
      VALUES ($1, $2, $3, $4::jsonb, now() + $5 * interval '1 millisecond', $6, $7)
      RETURNING coalesce(message_id, id::text) AS id, id::text AS row_id`,
    /** $1 seqs. */
    markSent: markSent('$1::bigint[]'),
    /** Marks `seqs` sent and commits, in one simple-query round trip (literal.ts). */
    markSentAndCommit: (seqs: readonly string[]) => `${markSent(bigintArrayLiteral(seqs))}; COMMIT`,
    /**
     * Deletes `seqs` and commits, in one round trip: the relay's record of confirmed rows when no
     * sent row is kept (`sentRetentionMs` 0). A delete only marks the old row versions, where
     * the UPDATE writes new ones into the table and the sent rows' index (about half the relay's
     * PostgreSQL CPU per row, and 0.19× the WAL, in bench/outbox/pg-round.mjs).
     */
    deleteSentAndCommit: (seqs: readonly string[]) =>
      `DELETE FROM ${outbox} WHERE seq = ANY(${bigintArrayLiteral(seqs)}); COMMIT`,
    /**
     * $1 seqs, $2 errors json, $3 delays ms, $4 park flags, $5 whether the attempt counts (a
     * broker that cannot take the message before a time, such as a republish inside its dedup
     * window, is no failed attempt).
     */
    markFailed: `UPDATE ${outbox} AS o SET
        attempts = o.attempts + CASE WHEN t.counts THEN 1 ELSE 0 END,
        last_error = t.e,
        available_at = now() + t.d * interval '1 millisecond',
        status = CASE WHEN t.park THEN 'failed' ELSE 'pending' END
      FROM unnest($1::bigint[], $2::jsonb[], $3::bigint[], $4::boolean[], $5::boolean[]) AS t(s, e, d, park, counts)
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

const CHANNEL_PREFIX = 'once_outbox_';
/** PostgreSQL's identifier limit (NAMEDATALEN - 1), in bytes; schema names are ASCII. */
const MAX_IDENTIFIER_BYTES = 63;
/** Hex digits of the schema name's SHA-256 in a shortened channel name (80 bits). */
const HASH_CHARS = 20;

/**
 * The LISTEN/NOTIFY channel of a schema's outbox, the same for `Outbox.wake`, the relay and the
 * admin API. `once_outbox_<schema>` while that fits PostgreSQL's 63-byte identifier limit (a
 * schema name up to 51 characters). Past it, LISTEN would silently truncate the name while
 * `pg_notify` refuses it ("channel name too long"), and no wake-up would ever arrive; so a longer
 * schema gets `once_outbox_<first 30 characters>_<20 hex digits of its SHA-256>`, exactly 63 bytes.
 * Two schemas sharing such a name would only wake each other's relays for nothing: a wasted round.
 */
export function outboxChannel(schemaName: string): string {
  quoteIdentifier(schemaName, 'schema');
  const plain = `${CHANNEL_PREFIX}${schemaName}`;
  if (plain.length <= MAX_IDENTIFIER_BYTES) return plain;
  const hash = createHash('sha256').update(schemaName).digest('hex').slice(0, HASH_CHARS);
  const keep = MAX_IDENTIFIER_BYTES - CHANNEL_PREFIX.length - 1 - HASH_CHARS;
  return `${CHANNEL_PREFIX}${schemaName.slice(0, keep)}_${hash}`;
}

/**
 * The relay's LISTEN and UNLISTEN of a schema's channel ({@link outboxChannel}), quoted by
 * `quoteIdentifier` like every identifier (the channel is one: lower-case, at most 63 bytes).
 */
export function listenSql(schemaName: string) {
  const name = outboxChannel(schemaName);
  const channel = quoteIdentifier(name, 'channel');
  return Object.freeze({
    /** The channel's name, the first parameter of {@link listenSql}'s `probe`. */
    channel: name,
    listen: `LISTEN ${channel}`,
    unlisten: `UNLISTEN ${channel}`,
    /**
     * The relay's check that its LISTEN session hears notifications, sent from another pool
     * connection. $1 channel, $2 payload (`probe:` and a token; relays ignore such payloads).
     */
    probe: 'SELECT pg_notify($1, $2)',
  });
}
