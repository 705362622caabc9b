import { ErrorCode, OnceError } from '../errors.js';
import { type Logger, silentLogger } from '../logger.js';
import { checkNumber } from '../option-check.js';
import { boundPool, resolvePoolBounds } from '../pg/bounded-pool.js';
import type { PgPoolLike } from '../pg/pg-like.js';
import type { NamedDatabases } from '../schema/databases.js';
import type { OutboxPublisher } from './outbox-publisher.js';

/** The relay's codes of {@link ErrorCode}, by their names there. */
export const RelayErrorCode = { PublishTimeout: ErrorCode.PublishTimeout } as const;

/** Rounds a relay runs at once unless told otherwise (`RelayOptions.concurrency`). */
export const DEFAULT_RELAY_CONCURRENCY = 2;

/**
 * Databases past this many in `databases` are polled rather than LISTENed to, unless
 * `maxListeners` says otherwise (`RelayOptions.maxListeners`).
 */
export const DEFAULT_RELAY_MAX_LISTENERS = 16;

/**
 * Options of {@link createRelay}: `pool` for one database's outbox, or `databases` for the
 * outboxes of several (exactly one of the two), and the settings they share.
 */
export type RelayOptions = RelayPoolOptions | RelayDatabasesOptions;

/** {@link RelayOptions} for one database's outbox. */
export interface RelayPoolOptions extends RelaySettings {
  /** The pool the relay claims and marks rows on (`new pg.Pool(...)`). */
  pool: PgPoolLike;
  /** Not with `pool`: give `databases` instead to serve several. */
  databases?: undefined;
  /** Only with `databases`. */
  maxListeners?: undefined;
}

/**
 * {@link RelayOptions} for the outboxes of several databases, served by one relay: each database
 * keeps its own rows, claims, attempts, parking, cleanup and order per key, and the settings
 * apply to each database alone, except `concurrency`, which is one budget shared by all.
 */
export interface RelayDatabasesOptions extends RelaySettings {
  /**
   * The databases whose outboxes the relay serves, name → pool (names as in
   * `migrateDatabases`: 1 to 63 characters of `[A-Za-z0-9_.-]`), at least one. Give each pool
   * room for one LISTEN connection (the first `maxListeners` databases) and up to `concurrency`
   * claims.
   */
  databases: NamedDatabases;
  /** Not with `databases`. */
  pool?: undefined;
  /**
   * How many databases get a LISTEN connection (one each), in the order of `databases`; the
   * rest are polled every `pollIntervalMs` and report `pollingOnly` in `health().databases`. The
   * default keeps 16 listeners and their claims (16 · (1 + `concurrency`) = 48 connections at the
   * default 2) under half of a server's `max_connections = 100`, leaving the rest to consumers.
   * `0`: poll every database. @default 16
   */
  maxListeners?: number | undefined;
}

/** The settings of {@link RelayOptions} that do not name the databases. */
export interface RelaySettings {
  /** @default 'once' */
  schema?: string | undefined;
  /** A publisher per destination (the names given to `createOutbox`). */
  publishers: Readonly<Record<string, OutboxPublisher>>;
  /** Rows claimed per round. @default 100 */
  batchSize?: number | undefined;
  /**
   * Rounds this relay runs at once, each on its own pool connection: while one round waits for
   * its broker, another claims and publishes the next rows. Every round keeps the guarantees of a
   * round alone: its rows stay locked (`FOR UPDATE SKIP LOCKED`) in its own transaction until it
   * has recorded the broker's verdict and committed, so no other round or relay takes them
   * meanwhile; only the oldest pending row of a key is ever claimed, so two rows of one key are
   * never in flight at once; and a row is marked sent only after its broker confirmed it. Rounds
   * past the first run only while there is more work than one round takes (a round claimed a full
   * batch); an idle relay, or one whose rows are spread over fewer keys than `batchSize`, polls,
   * listens and claims with one. The relay uses up to `concurrency` pool connections, plus one for
   * LISTEN. `1`: one round at a time, as before this option.
   *
   * With `databases`, one budget for all of them: at most `concurrency` rounds run at once over
   * all the databases, and when several databases have work the next free round goes to them in
   * turn, so a database with a backlog delays another's rows by about one round at most.
   * @default 2
   */
  concurrency?: number | undefined;
  /** Poll interval when no wake-up arrives, in ms. @default 1000 */
  pollIntervalMs?: number | undefined;
  /**
   * The deadline of one publisher call, in ms. When it passes, the call's `signal` is aborted
   * (the publisher gives up: closes its channel, aborts its request) and the round is rolled back
   * for that destination's rows: they stay pending with their attempts unchanged, are never
   * parked for it, and whatever the broker confirms late marks nothing sent. They are published
   * again, under the same id, in a later round. Rows of other destinations are recorded as usual.
   * Each abandoned row is reported by `outbox:publish-failed` with code `PUBLISH_TIMEOUT` and its
   * attempts as they were.
   * Keep it above the slowest healthy publish of `batchSize` messages: row locks are held this long.
   * @default 30000
   */
  publishTimeoutMs?: number | undefined;
  /** Publish attempts before a row is parked as `failed`. @default 10 */
  maxAttempts?: number | undefined;
  /** Delay before retrying a row after its nth failed attempt, in ms. @default min(500 · 2^(n-1), 60000) */
  retryDelayMs?: ((attempt: number) => number) | undefined;
  /**
   * Sent rows are deleted after this long, in ms. `0` keeps none: a confirmed row is deleted by
   * the statement that would have marked it sent, in the same commit, which costs PostgreSQL
   * about half the CPU and a fifth of the WAL per row of marking it. @default 1 day
   */
  sentRetentionMs?: number | undefined;
  /** How often sent rows are cleaned up, in ms. @default 60000 */
  cleanupIntervalMs?: number | undefined;
  /**
   * LISTEN for after-commit wake-ups (one connection held). At start the relay checks that its
   * LISTEN session hears a notification sent from another connection; where it does not (PgBouncer
   * in transaction or statement pooling mode hands each transaction to any server connection, so
   * the session that ran LISTEN is not the relay's), it releases that connection, logs a warning,
   * reports `pollingOnly` and polls every `pollIntervalMs`. `false`: poll only, no check.
   * @default true
   */
  listen?: boolean | undefined;
  /** How long the LISTEN check waits for its notification, in ms. @default 2000 */
  listenCheckMs?: number | undefined;
  /**
   * The longest the relay waits for the reply to one of its statements (the claim, marking rows,
   * COMMIT, cleanup, LISTEN), in ms. Past it the statement fails with `StatementTimeoutError`, its
   * connection is destroyed and the round rolled back (its rows stay pending). @default 30000
   */
  statementTimeoutMs?: number | undefined;
  /** The longest the relay waits for a pool connection, in ms. @default 10000 */
  connectTimeoutMs?: number | undefined;
  /** `(fields, message)`; `false` or none: silent. @default silent */
  logger?: Logger | false | undefined;
}

/** The relay's state, for health checks. */
export interface RelayHealth {
  /** True between `start()` and `stop()`. */
  running: boolean;
  /** True while a LISTEN connection wakes the relay on new rows. */
  listening: boolean;
  /**
   * True when wake-ups are off for good and rows are found by polling only: `listen: false`, or
   * the LISTEN session heard no notification (a transaction-pooling PgBouncer between the relay
   * and PostgreSQL).
   */
  pollingOnly: boolean;
  /** When the last round finished (ms since epoch), if any. */
  lastRoundAt: number | undefined;
  /** The last round's error, if it failed. */
  lastError: string | undefined;
  /** Rows published since start. */
  published: number;
  /** Rows parked since start (refused for good, or past `maxAttempts`). */
  parked: number;
  /**
   * With `databases`: each database's state, in the order given. The fields above then sum
   * (`published`, `parked`) or sum up: `listening` when a database listens, `pollingOnly` when
   * none does, `lastRoundAt` the latest, `lastError` the first database's with an error, named.
   */
  databases?: RelayDatabaseHealth[] | undefined;
}

/** One database's state in {@link RelayHealth.databases}. */
export interface RelayDatabaseHealth {
  /** The database's name in `databases`. */
  name: string;
  /** True while its LISTEN connection wakes the relay on its new rows. */
  listening: boolean;
  /** True when its rows are found by polling only: past `maxListeners`, `listen: false`, or no notifications heard. */
  pollingOnly: boolean;
  /** True when it is polled because `maxListeners` databases before it hold the listeners. */
  pastListenerCap: boolean;
  /** When its last round finished (ms since epoch), if any. */
  lastRoundAt: number | undefined;
  /** Its last round's error, if it failed (its database down, a broker refusing its rows). */
  lastError: string | undefined;
  /** Its rows published since start. */
  published: number;
  /** Its rows parked since start. */
  parked: number;
}

/** The relay's options after defaults, validated. */
export interface ResolvedRelayOptions {
  /** The user's pool behind once's statement and connect bounds (bounded-pool.ts). */
  pool: PgPoolLike;
  publishers: Readonly<Record<string, OutboxPublisher>>;
  batchSize: number;
  concurrency: number;
  pollIntervalMs: number;
  publishTimeoutMs: number;
  maxAttempts: number;
  retryDelayMs: (attempt: number) => number;
  sentRetentionMs: number;
  cleanupIntervalMs: number;
  listen: boolean;
  listenCheckMs: number;
  logger: Logger;
}

/** Applies the defaults and validates; throws `INVALID_OPTION` naming the bad field. */
export function resolveRelayOptions(options: RelaySettings & { pool: PgPoolLike }): ResolvedRelayOptions {
  const publishers = options.publishers;
  if (!publishers || typeof publishers !== 'object' || Object.keys(publishers).length === 0) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      "option 'publishers' must map at least one destination to a publisher",
    );
  }
  for (const [name, p] of Object.entries(publishers)) {
    if (typeof p?.publish !== 'function') {
      throw new OnceError(
        ErrorCode.InvalidOption,
        `option 'publishers.${name}' must have a publish() method`,
      );
    }
  }
  const logger = options.logger || silentLogger;
  return Object.freeze({
    pool: boundPool(options.pool, resolvePoolBounds(options)),
    publishers,
    batchSize: checkNumber('batchSize', options.batchSize ?? 100, 1),
    concurrency: checkNumber('concurrency', options.concurrency ?? DEFAULT_RELAY_CONCURRENCY, 1),
    pollIntervalMs: checkNumber('pollIntervalMs', options.pollIntervalMs ?? 1000, 1),
    publishTimeoutMs: checkNumber('publishTimeoutMs', options.publishTimeoutMs ?? 30_000, 1),
    maxAttempts: checkNumber('maxAttempts', options.maxAttempts ?? 10, 1),
    retryDelayMs: options.retryDelayMs ?? ((n: number) => Math.min(500 * 2 ** Math.max(0, n - 1), 60_000)),
    sentRetentionMs: checkNumber('sentRetentionMs', options.sentRetentionMs ?? 86_400_000, 0),
    cleanupIntervalMs: checkNumber('cleanupIntervalMs', options.cleanupIntervalMs ?? 60_000, 1),
    listen: options.listen ?? true,
    listenCheckMs: checkNumber('listenCheckMs', options.listenCheckMs ?? 2000, 1),
    logger,
  });
}
