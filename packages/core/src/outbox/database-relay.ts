import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { ErrorCode, OnceError, serializeError } from '../errors.js';
import { Events, ONCE_EVENT_NAMES, type OnceEventMap } from '../message/events.js';
import { keepAlive, warnPoolSettings } from '../pg/bounded-pool.js';
import { Connection, guardNewClients } from '../pg/connection.js';
import type { PgClientLike, PgPoolLike } from '../pg/pg-like.js';
import { quoteIdentifier } from '../sql/identifier.js';
import { fromJsonb, toJsonb } from '../sql/jsonb.js';
import { listenSql, outboxSql } from '../sql/outbox.js';
import type { OutboxMessage, OutboxPublisher, OutboxPublishResult } from './outbox-publisher.js';
import {
  RelayErrorCode,
  type RelayHealth,
  type RelaySettings,
  type ResolvedRelayOptions,
  resolveRelayOptions,
} from './relay-options.js';

interface Row {
  seq: string;
  id: string;
  destination: string;
  key: string | null;
  body: Buffer;
  /** As stored: decoded with `fromJsonb` before a publisher sees it. */
  headers: unknown;
  attempts: number;
  /** Set on a republish (migration 10): see `OutboxMessage.republish`. */
  republish_dedup_id: string | null;
}

/** A row the broker did not confirm: when it goes again, and whether that was a failed attempt. */
interface NotSent {
  row: Row;
  error: unknown;
  /** Parked as `failed`: no retry can help, or its attempts are spent. */
  park: boolean;
  /** A failed attempt; not when the broker only cannot take it yet (a dedup window). */
  counts: boolean;
  delayMs: number;
}

/**
 * What a relay over several databases gives each database's relay: the shared round budget that
 * a round enters once it holds its connection, before it claims, and leaves when it has ended.
 * Resolves with the leave function, or `undefined` when `signal` aborts first (stop()).
 */
export type EnterRound = (signal: AbortSignal) => Promise<(() => void) | undefined>;

/**
 * The relay machinery of one database (`createRelay` builds one per database). Any number of
 * relays may run, each running up to `concurrency` rounds at
 * once: each round claims rows with `FOR UPDATE SKIP LOCKED` in its own transaction (only the
 * oldest pending row of a key is eligible), publishes them while holding the claim, and marks a
 * row sent only once its broker confirmed it, committing after that. A relay that
 * dies mid-round leaves its rows pending: they are sent again, with the same id, and downstream
 * inboxes drop the copy.
 */
export class DatabaseRelay {
  readonly #o: ResolvedRelayOptions;
  readonly #sql: ReturnType<typeof outboxSql>;
  readonly #listenSql: ReturnType<typeof listenSql>;
  readonly #events: Events;
  readonly #enter: EnterRound | undefined;
  #running = false;
  /** Ends the first round loop's sleep (a NOTIFY, stop()). */
  #wake: (() => void) | undefined;
  /** End the sleeps of the other round loops, which wait for work rather than poll. */
  readonly #helpers = new Set<() => void>();
  #listener: PgClientLike | undefined;
  /** The LISTEN check failed: notifications do not reach this relay, so it stops trying. */
  #noNotifications = false;
  #loop: Promise<void> | undefined;
  #lastCleanup = 0;
  /**
   * Every round under way, from before it takes a connection to its end. `stop()` abandons each:
   * a round that has not claimed yet claims nothing, one whose claim is in flight rolls it back
   * when it returns, and one that is publishing gives its calls up as at the deadline. A round
   * starts after `stop()` only through `runOnce()`.
   */
  readonly #rounds = new Set<RoundState>();
  /** Ends the LISTEN check's wait when `stop()` comes during it. */
  #stopListenCheck: (() => void) | undefined;
  #health: RelayHealth = {
    running: false,
    listening: false,
    pollingOnly: false,
    lastRoundAt: undefined,
    lastError: undefined,
    published: 0,
    parked: 0,
  };

  /** `enter`: the shared round budget of a relay over several databases; none: rounds enter at once. */
  constructor(options: RelaySettings & { pool: PgPoolLike }, enter?: EnterRound) {
    if (!options || typeof options.pool?.connect !== 'function') {
      throw new OnceError(ErrorCode.InvalidOption, "option 'pool' must be a pg Pool");
    }
    guardNewClients(options.pool);
    const schema = options.schema ?? 'once';
    this.#sql = outboxSql(quoteIdentifier(schema, "option 'schema'"));
    this.#listenSql = listenSql(schema);
    this.#o = resolveRelayOptions(options);
    const logger = this.#o.logger;
    warnPoolSettings(this.#o.pool, logger);
    this.#health.pollingOnly = !this.#o.listen;
    this.#events = new Events(logger, { owner: 'Relay', names: ONCE_EVENT_NAMES });
    this.#enter = enter;
  }

  /** Subscribe to `outbox:published`, `outbox:publish-failed`, `outbox:parked`. */
  on<E extends keyof OnceEventMap>(name: E, listener: (event: OnceEventMap[E]) => void): () => void {
    return this.#events.on(name, listener);
  }

  /** Whether the relay runs, listens, and what it has published and parked; no database round trip. */
  health(): RelayHealth {
    return { ...this.#health };
  }

  /** Starts relaying in the background until {@link DatabaseRelay.stop}. */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    this.#health.running = true;
    // stop() awaits #loop: a stop() during the LISTEN check waits for it to end (at once: the
    // check hears of the stop), and no round loop starts after it.
    const listening = this.#o.listen ? this.#listen() : Promise.resolve();
    this.#loop = listening.then(async () => {
      if (!this.#running) return;
      const loops = [this.#run(false)];
      for (let i = 1; i < this.#o.concurrency; i++) loops.push(this.#run(true));
      await Promise.all(loops);
    });
    await listening;
  }

  /**
   * Stops and releases the LISTEN connection. No publisher is called once `stop()` has begun.
   * Every round under way is abandoned: publish calls in flight are given up as at the deadline
   * (their rows stay pending, attempts unchanged, and the next relay sends them again under the
   * same id; what the broker took meanwhile is a duplicate that inboxes drop), and a claim in
   * flight is rolled back when it returns, its rows left as they were. So `stop()` returns once
   * the statements in flight have ended, whatever the publishers do.
   */
  async stop(): Promise<void> {
    this.#running = false;
    this.#health.running = false;
    this.#wake?.();
    for (const wake of this.#helpers) wake();
    this.#stopListenCheck?.();
    for (const round of this.#rounds) round.abandon();
    await this.#loop;
    this.#loop = undefined;
    await this.#unlisten();
  }

  /** `await using relay = createRelay(...)`: stops the relay at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  /**
   * One round loop. The first polls and wakes on NOTIFY; the others (`concurrency` > 1) sleep
   * until a round claims a full batch, then run rounds of their own beside it while theirs are
   * full. The first goes again at once after a round that confirmed rows or claimed a full batch
   * (a round of a few keys claims only a row per key: it must not wait for the poll interval).
   * No loop goes again at once after a round that ran into the deadline (the broker is not
   * answering).
   */
  async #run(helper: boolean): Promise<void> {
    let failures = 0;
    while (this.#running) {
      let busy = false;
      try {
        const round = await this.#round();
        // A full batch says more rows are waiting than a round takes: the helpers join in. A round
        // short of a batch took every eligible row (with few keys, one per key): a helper's claim
        // would find nothing, so helpers only go on while their rounds are full.
        const full = !round.timedOut && round.claimed >= this.#o.batchSize;
        busy = helper ? full : full || (!round.timedOut && round.sent > 0);
        if (full) for (const wake of this.#helpers) wake();
        // A round that ran clears the error a thrown round left (publish failures are set in the round).
        if (failures > 0) this.#health.lastError = undefined;
        failures = 0;
        if (!helper && this.#running && !this.#listener && this.#o.listen && !this.#noNotifications)
          await this.#listen();
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
      // stop() during the round: its wake-up found no sleep to end, so do not start one.
      if (!this.#running) break;
      if (busy) continue;
      // A helper without a failure to back off from waits for work, found by another round.
      const pause =
        failures > 0
          ? Math.min(this.#o.pollIntervalMs * 2 ** failures, 30_000)
          : helper
            ? undefined
            : this.#o.pollIntervalMs;
      await new Promise<void>((resolve) => {
        const timer = pause === undefined ? undefined : setTimeout(done, pause);
        const wakers = this.#helpers;
        function done() {
          clearTimeout(timer);
          if (helper) wakers.delete(done);
          resolve();
        }
        if (helper) this.#helpers.add(done);
        else this.#wake = done;
      });
      if (!helper) this.#wake = undefined;
    }
  }

  /**
   * One round: claim, publish, record. Returns the number of rows claimed. Exposed for tests
   * and for callers that drive the relay themselves.
   */
  async runOnce(): Promise<number> {
    return (await this.#round()).claimed;
  }

  /** One round: the rows it claimed and confirmed, and whether a publisher call outlived the deadline. */
  async #round(): Promise<RoundResult> {
    // Registered before its first await, so a stop() from here on reaches it.
    const round = new RoundState();
    this.#rounds.add(round);
    try {
      return await this.#roundOn(round);
    } finally {
      this.#rounds.delete(round);
    }
  }

  async #roundOn(round: RoundState): Promise<RoundResult> {
    const conn = await Connection.open(this.#o.pool);
    // The connection first, then the place in the budget: a database that takes long to connect
    // (or refuses) holds no place that another database's round could use meanwhile.
    const leave = round.abandoned ? undefined : this.#enter === undefined ? noop : await this.#admit(round);
    if (leave === undefined) {
      conn.release();
      return NONE;
    }
    try {
      return await this.#claimAndPublish(conn, round);
    } finally {
      leave();
    }
  }

  /** A place in the shared budget; `undefined` when stop() came first. */
  async #admit(round: RoundState): Promise<(() => void) | undefined> {
    if (this.#enter === undefined) return noop;
    const stopping = new AbortController();
    round.onAbandon(() => stopping.abort());
    try {
      return await this.#enter(stopping.signal);
    } finally {
      round.onAbandon(undefined);
    }
  }

  async #claimAndPublish(conn: Connection, round: RoundState): Promise<RoundResult> {
    try {
      const rows = lastResult<Row>(await conn.client.query(this.#sql.beginAndClaim(this.#o.batchSize))).rows;
      // stop() came while the claim was in flight. The claim skips rows other rounds hold, so
      // the rows it returns may be ones a round abandoned by the same stop() has released since
      // (its COMMIT ran first): publishing them now would publish after stop(), with nobody left
      // to give the call up. Rolled back, they stay pending as they were.
      if (round.abandoned) {
        await conn.client.query(this.#sql.rollback);
        conn.release();
        return NONE;
      }
      if (rows.length === 0) {
        await conn.client.query(this.#sql.commit);
        await this.#maybeCleanup(conn.client, round);
        conn.release();
        this.#health.lastRoundAt = Date.now();
        return NONE;
      }
      const { results, timedOut, reason } = await this.#publishAll(rows, round);
      const sent: string[] = [];
      const failed: NotSent[] = [];
      const late: Row[] = [];
      for (const row of rows) {
        // Rolled back: not updated, so pending with attempts and due time as they were.
        if (timedOut.has(row.destination)) {
          late.push(row);
          continue;
        }
        const r = results.get(resultKey(row));
        if (r?.ok) sent.push(row.seq);
        else failed.push(this.#notSent(row, r));
      }
      if (failed.length > 0) {
        await conn.client.query(this.#sql.markFailed, [
          failed.map((f) => f.row.seq),
          failed.map((f) => toJsonb(serializeError(f.error))),
          failed.map((f) => f.delayMs),
          failed.map((f) => f.park),
          failed.map((f) => f.counts),
        ]);
      }
      await conn.client.query(
        sent.length === 0
          ? this.#sql.commit
          : this.#o.sentRetentionMs === 0
            ? this.#sql.deleteSentAndCommit(sent)
            : this.#sql.markSentAndCommit(sent),
      );
      conn.release();
      this.#health.lastRoundAt = Date.now();
      this.#health.published += sent.length;
      // A round where the broker refused everything is a broker fault worth surfacing in health;
      // any confirmed message clears it.
      // A republish held for a dedup window is no fault.
      const counted = failed.filter((f) => f.counts);
      if (late.length > 0) this.#health.lastError = `${reason.message} (${[...timedOut].join(', ')})`;
      else if (sent.length > 0) this.#health.lastError = undefined;
      else if (counted.length > 0)
        this.#health.lastError = `publish failed: ${serializeError(counted[0]!.error).message}`;
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
            attempts: f.row.attempts + (f.counts ? 1 : 0),
            error,
          });
          if (!f.counts) {
            this.#o.logger.info(
              { id: f.row.id, destination: f.row.destination, retryAfterMs: f.delayMs, error: error.message },
              'once relay: the broker cannot take this message yet; left pending until then',
            );
          }
        }
      }
      return { claimed: rows.length, sent: sent.length, timedOut: timedOut.size > 0 };
    } catch (err) {
      await conn.client.query(this.#sql.rollback).catch(() => {});
      conn.destroy(err);
      throw err;
    }
  }

  /**
   * What becomes of a row the broker did not confirm. A `retryAfterMs` (the broker cannot take it
   * before then: a republish inside its dedup window) leaves it pending until then, attempts as
   * they were; anything else is a failed attempt, retried after `retryDelayMs` or parked.
   */
  #notSent(row: Row, r: OutboxPublishResult | undefined): NotSent {
    if (r === undefined || r.ok) {
      const error = new Error('publisher returned no result for this message');
      return this.#attempt(row, error, true);
    }
    const after = r.retryAfterMs;
    if (r.retryable !== false && typeof after === 'number' && Number.isFinite(after) && after >= 0) {
      return { row, error: r.error, park: false, counts: false, delayMs: Math.ceil(after) };
    }
    return this.#attempt(row, r.error, r.retryable !== false);
  }

  #attempt(row: Row, error: unknown, retryable: boolean): NotSent {
    const delayMs = Math.max(0, Math.floor(this.#o.retryDelayMs(row.attempts + 1)));
    const park = !retryable || row.attempts + 1 >= this.#o.maxAttempts;
    return { row, error, park, counts: true, delayMs };
  }

  /**
   * Publishes each destination's rows through its publisher; one result per destination and
   * message id, and the destinations whose call outlived the deadline (their results, if any
   * come, are ignored).
   */
  async #publishAll(
    rows: Row[],
    round: RoundState,
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
    // A publisher may wait on the signal once per message of the round (each removes its listener
    // when done): up to batchSize listeners is expected, not the leak Node's default of 10 warns of.
    setMaxListeners(Math.max(10, rows.length + 10), controller.signal);
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
    round.onAbandon(onStop);
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
        const seen = new Map<string, OutboxMessage>();
        for (const row of list) {
          const republish =
            row.republish_dedup_id === null ? undefined : { deduplicationId: row.republish_dedup_id };
          const known = seen.get(row.id);
          if (known) {
            // One of them republishes: the copy the broker may drop is theirs too.
            if (republish && !known.republish) known.republish = republish;
            continue;
          }
          const message: OutboxMessage = {
            id: row.id,
            destination,
            key: row.key ?? undefined,
            body: row.body,
            headers: fromJsonb<Record<string, string> | null>(row.headers) ?? {},
          };
          if (republish) message.republish = republish;
          seen.set(row.id, message);
          messages.push(message);
        }
        const key = (id: string) => resultKey({ destination, id });
        try {
          // Called a microtask later: after a stop() (or the deadline) in between, the publisher
          // is not called at all.
          const call = Promise.resolve().then<typeof TIMED_OUT | PublishOutcome>(() =>
            controller.signal.aborted
              ? TIMED_OUT
              : publisher.publish(messages, { signal: controller.signal }),
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
      round.onAbandon(undefined);
    }
    return { results, timedOut, reason };
  }

  async #maybeCleanup(client: PgClientLike, round: RoundState): Promise<void> {
    if (Date.now() - this.#lastCleanup < this.#o.cleanupIntervalMs) return;
    this.#lastCleanup = Date.now();
    // Each step commits by itself: a stop() ends the cleanup after the step in flight.
    for (let i = 0; i < 100 && !round.abandoned; i++) {
      const res = await client.query(this.#sql.cleanupStep, [this.#o.sentRetentionMs, 1000]);
      if ((res.rowCount ?? 0) < 1000) break;
    }
  }

  async #listen(): Promise<void> {
    let client: PgClientLike | undefined;
    try {
      client = await this.#o.pool.connect();
      // An idle LISTEN session sends nothing: only TCP keepalive notices its peer is gone.
      keepAlive(client);
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
        if (client !== undefined && this.#listener === client) {
          this.#listener = undefined;
          this.#health.listening = false;
          client.release(err);
        }
      });
      let heard: (() => void) | undefined;
      const token = `${PROBE_PREFIX}${randomUUID()}`;
      (c.on as unknown as (e: string, l: (n: { payload?: string }) => void) => void)?.call(
        client,
        'notification',
        (n) => {
          // Another relay's check is no work for this one.
          if (n?.payload?.startsWith(PROBE_PREFIX)) {
            if (n.payload === token) heard?.();
            return;
          }
          this.#wake?.();
        },
      );
      await client.query(this.#listenSql.listen);
      const check = this.#running ? await this.#hears(token, (resolve) => (heard = resolve)) : 'stopped';
      // stop() came meanwhile: it released no listener, so this one must not stay.
      if (check === 'stopped' || !this.#running) {
        client.release(true);
        return;
      }
      if (check === 'silent') {
        this.#noNotifications = true;
        this.#health.pollingOnly = true;
        this.#o.logger.warn(
          { checkMs: this.#o.listenCheckMs, pollIntervalMs: this.#o.pollIntervalMs },
          'once relay: LISTEN hears no notifications (a pooler in transaction mode, such as PgBouncer?); polling only',
        );
        // Destroyed, not returned: the pool keeps no connection with this relay's listeners on it.
        client.release(true);
        return;
      }
      this.#listener = client;
      this.#health.listening = true;
    } catch (err) {
      if (client !== undefined && this.#listener !== client) client.release(err as Error);
      this.#o.logger.warn({ error: String(err) }, 'once relay: LISTEN failed; polling');
    }
  }

  /**
   * Sends `token` on the channel from another pool connection and waits up to `listenCheckMs` for
   * the LISTEN session to hear it. Without a pooler in between it arrives in milliseconds.
   */
  async #hears(
    token: string,
    onHeard: (resolve: () => void) => void,
  ): Promise<'heard' | 'silent' | 'stopped'> {
    let timer: NodeJS.Timeout | undefined;
    const heard = new Promise<'heard' | 'silent' | 'stopped'>((resolve) => {
      onHeard(() => resolve('heard'));
      timer = setTimeout(() => resolve('silent'), this.#o.listenCheckMs);
      this.#stopListenCheck = () => resolve('stopped');
    });
    try {
      const probe = this.#o.pool.query(this.#listenSql.probe, [this.#listenSql.channel, token]);
      // A stop() ends the wait at once, the probe's statement in flight or not.
      return await Promise.race([heard, probe.then(() => heard)]);
    } finally {
      clearTimeout(timer);
      this.#stopListenCheck = undefined;
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

/** What a round did: the rows it claimed and confirmed, and whether a publisher call outlived the deadline. */
interface RoundResult {
  claimed: number;
  sent: number;
  timedOut: boolean;
}

const NONE: RoundResult = Object.freeze({ claimed: 0, sent: 0, timedOut: false });
const noop = (): void => {};

const TIMED_OUT = Symbol('timed out');
/** What a publisher's call resolves to. */
type PublishOutcome = Awaited<ReturnType<OutboxPublisher['publish']>>;
/** Payloads of the LISTEN checks of relays; never a wake-up. */
const PROBE_PREFIX = 'probe:';

/** The last result of a multi-statement simple query (BEGIN; SET ...; claim). */
function lastResult<T>(results: unknown): { rows: T[] } {
  return (Array.isArray(results) ? results[results.length - 1] : results) as { rows: T[] };
}

function timeoutError(ms: number): OnceError {
  return new OnceError(
    RelayErrorCode.PublishTimeout,
    `publishing outlived publishTimeoutMs (${ms} ms): aborted, rows left pending with attempts unchanged`,
    { retryable: true },
  );
}

/**
 * One round's standing with `stop()`: abandoned once stop() has begun, and the give-up of its
 * publish calls while they run.
 */
class RoundState {
  #abandoned = false;
  #giveUp: (() => void) | undefined;

  get abandoned(): boolean {
    return this.#abandoned;
  }

  /** Sets (or clears) what abandoning the round does to its publish calls in flight. */
  onAbandon(giveUp: (() => void) | undefined): void {
    this.#giveUp = giveUp;
    if (giveUp && this.#abandoned) giveUp();
  }

  abandon(): void {
    this.#abandoned = true;
    this.#giveUp?.();
  }
}

/** Results are per destination: one message id may go to two destinations. */
function resultKey(row: { destination: string; id: string }): string {
  return `${row.destination}\u0000${row.id}`;
}
