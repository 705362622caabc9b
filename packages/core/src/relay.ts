import { Connection, guardNewClients } from './connection.js';
import { ErrorCode, OnceError, serializeError } from './errors.js';
import { Events, type OnceEventListener, type OnceEventName } from './events.js';
import { quoteIdentifier } from './identifier.js';
import { type Logger, silentLogger } from './logger.js';
import { checkNumber } from './options.js';
import type { OutboxMessage, OutboxPublisher, OutboxPublishResult } from './outbox-publisher.js';
import type { PgClientLike, PgPoolLike } from './pg-like.js';
import { fromJsonb, toJsonb } from './sql/jsonb.js';
import { listenSql, outboxSql } from './sql/outbox.js';

/**
 * Error codes of the relay, in `outbox:publish-failed` events and `health().lastError`. Defined
 * here rather than in core's `ErrorCode` until that list is reorganised.
 */
export const RelayErrorCode = {
  /** A publisher call outlived `publishTimeoutMs`: aborted, its rows left pending, attempts unchanged. */
  PublishTimeout: 'PUBLISH_TIMEOUT',
} as const;

/** Options of {@link createRelay}. */
export interface RelayOptions {
  pool: PgPoolLike;
  /** @default 'once' */
  schema?: string | undefined;
  /** A publisher per destination (the names given to `createOutbox`). */
  publishers: Readonly<Record<string, OutboxPublisher>>;
  /** Rows claimed per round. @default 100 */
  batchSize?: number | undefined;
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
  /** Sent rows are deleted after this long, in ms. @default 1 day */
  sentRetentionMs?: number | undefined;
  /** How often sent rows are cleaned up, in ms. @default 60000 */
  cleanupIntervalMs?: number | undefined;
  /** LISTEN for after-commit wake-ups (one connection held). @default true */
  listen?: boolean | undefined;
  /** `(fields, message)`; `false` or none: silent. @default silent */
  logger?: Logger | false | undefined;
}

/** The relay's state, for health checks. */
export interface RelayHealth {
  running: boolean;
  listening: boolean;
  /** When the last round finished (ms since epoch), if any. */
  lastRoundAt: number | undefined;
  lastError: string | undefined;
  published: number;
  parked: number;
}

interface Row {
  seq: string;
  id: string;
  destination: string;
  key: string | null;
  body: Buffer;
  /** As stored: decoded with `fromJsonb` before a publisher sees it. */
  headers: unknown;
  attempts: number;
}

/**
 * Publishes outbox rows. Any number of relays may run: each round claims rows with
 * `FOR UPDATE SKIP LOCKED` (only the oldest pending row of a key is eligible), publishes them
 * while holding the claim, and marks a row sent only once its broker confirmed it. A relay that
 * dies mid-round leaves its rows pending: they are sent again, with the same id, and downstream
 * inboxes drop the copy.
 */
export class Relay {
  readonly #o: {
    pool: PgPoolLike;
    publishers: Readonly<Record<string, OutboxPublisher>>;
    batchSize: number;
    pollIntervalMs: number;
    publishTimeoutMs: number;
    maxAttempts: number;
    retryDelayMs: (attempt: number) => number;
    sentRetentionMs: number;
    cleanupIntervalMs: number;
    listen: boolean;
    logger: Logger;
  };
  readonly #sql: ReturnType<typeof outboxSql>;
  readonly #listenSql: ReturnType<typeof listenSql>;
  readonly #events: Events;
  #running = false;
  #wake: (() => void) | undefined;
  #listener: PgClientLike | undefined;
  #loop: Promise<void> | undefined;
  #lastCleanup = 0;
  /** The last round had a destination outlive the deadline: no point in going again at once. */
  #roundTimedOut = false;
  /** For each round publishing now: ends its calls as the deadline would. */
  readonly #giveUps = new Set<() => void>();
  #health: RelayHealth = {
    running: false,
    listening: false,
    lastRoundAt: undefined,
    lastError: undefined,
    published: 0,
    parked: 0,
  };

  constructor(options: RelayOptions) {
    if (!options || typeof options.pool?.connect !== 'function') {
      throw new OnceError(ErrorCode.InvalidOption, 'options.pool must be a pg Pool');
    }
    guardNewClients(options.pool);
    const schema = options.schema ?? 'once';
    this.#sql = outboxSql(quoteIdentifier(schema, 'options.schema'));
    this.#listenSql = listenSql(schema);
    const publishers = options.publishers;
    if (!publishers || typeof publishers !== 'object' || Object.keys(publishers).length === 0) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        'options.publishers must map at least one destination to a publisher',
      );
    }
    for (const [name, p] of Object.entries(publishers)) {
      if (typeof p?.publish !== 'function') {
        throw new OnceError(
          ErrorCode.InvalidOption,
          `options.publishers.${name} must have a publish() method`,
        );
      }
    }
    const logger = options.logger || silentLogger;
    this.#o = {
      pool: options.pool,
      publishers,
      batchSize: checkNumber('batchSize', options.batchSize ?? 100, 1),
      pollIntervalMs: checkNumber('pollIntervalMs', options.pollIntervalMs ?? 1000, 1),
      publishTimeoutMs: checkNumber('publishTimeoutMs', options.publishTimeoutMs ?? 30_000, 1),
      maxAttempts: checkNumber('maxAttempts', options.maxAttempts ?? 10, 1),
      retryDelayMs: options.retryDelayMs ?? ((n: number) => Math.min(500 * 2 ** Math.max(0, n - 1), 60_000)),
      sentRetentionMs: checkNumber('sentRetentionMs', options.sentRetentionMs ?? 86_400_000, 0),
      cleanupIntervalMs: checkNumber('cleanupIntervalMs', options.cleanupIntervalMs ?? 60_000, 1),
      listen: options.listen ?? true,
      logger,
    };
    this.#events = new Events(logger);
  }

  /** Subscribe to `outbox:published`, `outbox:publish-failed`, `outbox:parked`. */
  on<E extends OnceEventName>(name: E, listener: OnceEventListener<E>): () => void {
    return this.#events.on(name, listener);
  }

  health(): RelayHealth {
    return { ...this.#health };
  }

  /** Starts relaying in the background until {@link Relay.stop}. */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    this.#health.running = true;
    if (this.#o.listen) await this.#listen();
    this.#loop = this.#run();
  }

  /**
   * Stops and releases the LISTEN connection. Publish calls in flight are abandoned as at the
   * deadline: their rows stay pending, attempts unchanged, and the next relay sends them again
   * under the same id (what the broker took meanwhile is a duplicate that inboxes drop).
   */
  async stop(): Promise<void> {
    this.#running = false;
    this.#health.running = false;
    this.#wake?.();
    for (const giveUp of this.#giveUps) giveUp();
    await this.#loop;
    this.#loop = undefined;
    await this.#unlisten();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (this.#running) {
      let busy = false;
      try {
        busy = (await this.runOnce()) >= this.#o.batchSize && !this.#roundTimedOut;
        // A round that ran clears the error a thrown round left (publish failures are set in runOnce).
        if (failures > 0) this.#health.lastError = undefined;
        failures = 0;
        if (!this.#listener && this.#o.listen) await this.#listen();
      } catch (err) {
        failures++;
        this.#health.lastError = String((err as Error)?.message ?? err);
        this.#o.logger.warn(
          {
            error: this.#health.lastError,
            failures,
          },
          'once relay: round failed; backing off',
        );
      }
      if (busy && this.#running) continue;
      const pause =
        failures > 0 ? Math.min(this.#o.pollIntervalMs * 2 ** failures, 30_000) : this.#o.pollIntervalMs;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, pause);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.#wake = done;
      });
      this.#wake = undefined;
    }
  }

  /**
   * One round: claim, publish, record. Returns the number of rows claimed. Exposed for tests
   * and for callers that drive the relay themselves.
   */
  async runOnce(): Promise<number> {
    this.#roundTimedOut = false;
    const conn = await Connection.open(this.#o.pool);
    try {
      await conn.client.query(this.#sql.begin);
      const rows = (await conn.client.query<Row>(this.#sql.claim, [this.#o.batchSize])).rows;
      if (rows.length === 0) {
        await conn.client.query(this.#sql.commit);
        await this.#maybeCleanup(conn.client);
        conn.release();
        this.#health.lastRoundAt = Date.now();
        return 0;
      }
      const { results, timedOut, reason } = await this.#publishAll(rows);
      this.#roundTimedOut = timedOut.size > 0;
      const sent: string[] = [];
      const failed: { row: Row; error: unknown; park: boolean }[] = [];
      const late: Row[] = [];
      for (const row of rows) {
        // Rolled back: not updated, so pending with attempts and due time as they were.
        if (timedOut.has(row.destination)) {
          late.push(row);
          continue;
        }
        const r = results.get(resultKey(row));
        if (r?.ok) sent.push(row.seq);
        else {
          const error = r && !r.ok ? r.error : new Error('publisher returned no result for this message');
          const retryable = r && !r.ok ? r.retryable !== false : true;
          failed.push({ row, error, park: !retryable || row.attempts + 1 >= this.#o.maxAttempts });
        }
      }
      if (sent.length > 0) await conn.client.query(this.#sql.markSent, [sent]);
      if (failed.length > 0) {
        await conn.client.query(this.#sql.markFailed, [
          failed.map((f) => f.row.seq),
          failed.map((f) => toJsonb(serializeError(f.error))),
          failed.map((f) => Math.max(0, Math.floor(this.#o.retryDelayMs(f.row.attempts + 1)))),
          failed.map((f) => f.park),
        ]);
      }
      await conn.client.query(this.#sql.commit);
      conn.release();
      this.#health.lastRoundAt = Date.now();
      this.#health.published += sent.length;
      // A round where the broker refused everything is a broker fault worth surfacing in health;
      // any confirmed message clears it.
      if (late.length > 0) this.#health.lastError = `${reason.message} (${[...timedOut].join(', ')})`;
      else if (sent.length > 0) this.#health.lastError = undefined;
      else if (failed.length > 0)
        this.#health.lastError = `publish failed: ${serializeError(failed[0]!.error).message}`;
      if (sent.length > 0) this.#events.emit('outbox:published', { count: sent.length });
      for (const row of late) {
        this.#events.emit('outbox:publish-failed', {
          id: row.id,
          destination: row.destination,
          attempts: row.attempts,
          error: serializeError(reason),
        });
      }
      if (late.length > 0) {
        this.#o.logger.warn(
          {
            error: reason.message,
            destinations: [...timedOut],
            rows: late.length,
            publishTimeoutMs: this.#o.publishTimeoutMs,
          },
          'once relay: publish abandoned; rows left pending',
        );
      }
      for (const f of failed) {
        const error = serializeError(f.error);
        if (f.park) {
          this.#health.parked++;
          this.#events.emit('outbox:parked', { id: f.row.id, destination: f.row.destination, error });
          this.#o.logger.error(
            {
              id: f.row.id,
              error: error.message,
            },
            'once relay: message parked as failed',
          );
        } else {
          this.#events.emit('outbox:publish-failed', {
            id: f.row.id,
            destination: f.row.destination,
            attempts: f.row.attempts + 1,
            error,
          });
        }
      }
      return rows.length;
    } catch (err) {
      await conn.client.query(this.#sql.rollback).catch(() => {});
      conn.destroy(err);
      throw err;
    }
  }

  /**
   * Publishes each destination's rows through its publisher; one result per destination and
   * message id, and the destinations whose call outlived the deadline (their results, if any
   * come, are ignored).
   */
  async #publishAll(
    rows: Row[],
  ): Promise<{ results: Map<string, OutboxPublishResult>; timedOut: Set<string>; reason: OnceError }> {
    const byDestination = new Map<string, Row[]>();
    for (const row of rows) {
      const list = byDestination.get(row.destination) ?? [];
      list.push(row);
      byDestination.set(row.destination, list);
    }
    const results = new Map<string, OutboxPublishResult>();
    const timedOut = new Set<string>();
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let reason = timeoutError(this.#o.publishTimeoutMs);
    const onStop = () =>
      giveUp(
        new OnceError(ErrorCode.Closed, 'the relay is stopping: publish abandoned, rows left pending', {
          retryable: true,
        }),
      );
    let giveUp: (why: OnceError) => void = () => {};
    const deadline = new Promise<typeof TIMED_OUT>((resolve) => {
      giveUp = (why: OnceError) => {
        if (controller.signal.aborted) return;
        reason = why;
        clearTimeout(timer);
        // The deadline settles before the publishers hear of the abort, so a verdict they give
        // in reaction to it (a failure that would count an attempt) always loses the race.
        resolve(TIMED_OUT);
        controller.abort(why);
      };
      timer = setTimeout(() => giveUp(reason), this.#o.publishTimeoutMs);
    });
    this.#giveUps.add(onStop);
    const settled = Promise.all(
      [...byDestination].map(async ([destination, list]) => {
        const publisher = this.#o.publishers[destination];
        if (!publisher) {
          const error = new OnceError(
            ErrorCode.InvalidOption,
            `no publisher for destination ${JSON.stringify(destination)}`,
          );
          for (const row of list) results.set(resultKey(row), { id: row.id, ok: false, error });
          return;
        }
        // Rows that share a message id (a message republished twice) are one message to the
        // broker and to downstream inboxes: it is published once and its verdict is theirs.
        const messages: OutboxMessage[] = [];
        const seen = new Set<string>();
        for (const row of list) {
          if (seen.has(row.id)) continue;
          seen.add(row.id);
          messages.push({
            id: row.id,
            destination,
            key: row.key ?? undefined,
            body: row.body,
            headers: fromJsonb<Record<string, string> | null>(row.headers) ?? {},
          });
        }
        const key = (id: string) => resultKey({ destination, id });
        try {
          const call = Promise.resolve().then(() =>
            publisher.publish(messages, { signal: controller.signal }),
          );
          // Once the deadline passed nobody awaits the call: its late verdict must not surface.
          call.catch(() => {});
          const out = await Promise.race([call, deadline]);
          if (out === TIMED_OUT) {
            timedOut.add(destination);
            return;
          }
          if (!out) for (const m of messages) results.set(key(m.id), { id: m.id, ok: true });
          else for (const r of out) results.set(key(r.id), r);
        } catch (error) {
          for (const m of messages) results.set(key(m.id), { id: m.id, ok: false, error: error as Error });
        }
      }),
    );
    try {
      await settled;
    } finally {
      clearTimeout(timer);
      this.#giveUps.delete(onStop);
    }
    return { results, timedOut, reason };
  }

  async #maybeCleanup(client: PgClientLike): Promise<void> {
    if (Date.now() - this.#lastCleanup < this.#o.cleanupIntervalMs) return;
    this.#lastCleanup = Date.now();
    for (let i = 0; i < 100; i++) {
      const res = await client.query(this.#sql.cleanupStep, [this.#o.sentRetentionMs, 1000]);
      if ((res.rowCount ?? 0) < 1000) break;
    }
  }

  async #listen(): Promise<void> {
    try {
      const client = await this.#o.pool.connect();
      const c = client as PgClientLike & {
        on?(event: 'notification', l: () => void): unknown;
      };
      client.on?.('error', (err: Error) => {
        this.#o.logger.warn(
          {
            error: err.message,
          },
          'once relay: LISTEN connection lost; polling until it is back',
        );
        if (this.#listener === client) {
          this.#listener = undefined;
          this.#health.listening = false;
          client.release(err);
        }
      });
      (c.on as unknown as (e: string, l: () => void) => void)?.call(client, 'notification', () =>
        this.#wake?.(),
      );
      await client.query(this.#listenSql.listen);
      this.#listener = client;
      this.#health.listening = true;
    } catch (err) {
      this.#o.logger.warn({ error: String(err) }, 'once relay: LISTEN failed; polling');
    }
  }

  async #unlisten(): Promise<void> {
    const client = this.#listener;
    this.#listener = undefined;
    this.#health.listening = false;
    if (!client) return;
    try {
      await client.query(this.#listenSql.unlisten);
      client.release();
    } catch (err) {
      client.release(err as Error);
    }
  }
}

/** Creates a {@link Relay}; call `start()` to run it. */
export function createRelay(options: RelayOptions): Relay {
  return new Relay(options);
}

const TIMED_OUT = Symbol('timed out');

function timeoutError(ms: number): OnceError {
  return new OnceError(
    RelayErrorCode.PublishTimeout,
    `publishing outlived publishTimeoutMs (${ms} ms): aborted, rows left pending with attempts unchanged`,
    { retryable: true },
  );
}

/** Results are per destination: one message id may go to two destinations. */
function resultKey(row: { destination: string; id: string }): string {
  return `${row.destination}\u0000${row.id}`;
}
