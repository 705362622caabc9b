import { Connection, guardNewClients } from './connection.js';
import { type Envelope, originOf, resolveId } from './envelope.js';
import { ErrorCode, OnceError, PermanentError, serializeError } from './errors.js';
import { Events, type OnceEventListener, type OnceEventName } from './events.js';
import { type Fence, resolveFence } from './fence.js';
import { fingerprint } from './fingerprint.js';
import { LeaseProcessor } from './lease/lease-processor.js';
import { checkSchema } from './migrate.js';
import { type InboxOptions, type ResolvedInboxOptions, resolveInboxOptions } from './options.js';
import type { FailReason, Outcome } from './outcome.js';
import { Outcomes } from './outcomes.js';
import type { QueryResultLike } from './pg-like.js';
import { DeadlineError, type HandlerRun, runHandler } from './run-handler.js';
import { type FenceSql, fenceSql } from './sql/fence.js';
import { type InboxSql, inboxSql } from './sql/inbox.js';
import { classifyDbError } from './sqlstate.js';

/** A message with its id resolved and its fingerprint taken. */
interface Item {
  envelope: Envelope;
  id: string;
  fp: Buffer;
  /** Set when `fenceOf` placed the message: the fence is its claim, not an inbox row. */
  fence?: Fence | undefined;
}

interface Row {
  message_id: string;
  status: 'done' | 'failed' | 'in_progress';
  fingerprint: Buffer;
  result: unknown;
}

/** Marker for errors raised by once's own statements, as opposed to the handler's. */
class StatementError extends Error {
  constructor(readonly original: unknown) {
    super('statement failed');
  }
}

/**
 * Processes envelopes effectively once: the id's claim and the handler's writes commit or roll
 * back together. Adapters call {@link Inbox.process} or {@link Inbox.processBatch} and settle the
 * broker from the outcome. Create one with {@link createInbox}.
 */
export class Inbox<R = unknown> {
  readonly options: ResolvedInboxOptions<R>;
  readonly #sql: InboxSql;
  readonly #events: Events;
  readonly #out: Outcomes<R>;
  readonly #begin: string;
  readonly #beginAndClaim: (consumer: string, id: string, fp: Buffer, retentionMs: number) => string;
  readonly #fenceSql: FenceSql;
  readonly #beginAndFence: (consumer: string, stream: string, partition: number, offset: bigint) => string;
  readonly #beginAndLockFence: (consumer: string, stream: string, partition: number, first: bigint) => string;
  /** Set in lease mode, which processes every message through it. */
  readonly #lease: LeaseProcessor<R> | undefined;
  #ready: Promise<void> | undefined;

  constructor(options: ResolvedInboxOptions<R>) {
    this.options = options;
    guardNewClients(options.pool);
    this.#sql = inboxSql(options.quotedSchema);
    this.#events = new Events(options.logger);
    this.#out = new Outcomes(options);
    this.#begin = this.#sql.begin(options.isolation, options.lockTimeoutMs);
    this.#beginAndClaim = this.#sql.beginAndClaim(options.isolation, options.lockTimeoutMs);
    this.#fenceSql = fenceSql(options.quotedSchema);
    this.#beginAndFence = this.#fenceSql.beginAndFence(options.isolation, options.lockTimeoutMs);
    this.#beginAndLockFence = this.#fenceSql.beginAndLockFence(options.isolation, options.lockTimeoutMs);
    this.#lease = options.mode === 'lease' ? new LeaseProcessor(options, this.#events) : undefined;
  }

  /** The consumer name effects are recorded under. */
  get consumer(): string {
    return this.options.consumer;
  }

  /** Subscribe to an event; returns an unsubscribe function. */
  on<E extends OnceEventName>(name: E, listener: OnceEventListener<E>): () => void {
    return this.#events.on(name, listener);
  }

  /**
   * Checks once that the schema is installed at the expected version. Throws SCHEMA_NOT_INSTALLED
   * or SCHEMA_TOO_NEW (configuration errors: nothing to retry), or the connection error.
   */
  ready(): Promise<void> {
    if (!this.#ready) {
      this.#ready = checkSchema(this.options.pool, this.options.schema).catch((err: unknown) => {
        this.#ready = undefined;
        throw err;
      });
    }
    return this.#ready;
  }

  /**
   * Counts a start of this message and returns how many there have been, committed on its own
   * before the message runs. An adapter whose broker counts receives rather than runs calls it
   * for a redelivered message it is about to run alone: when a message kills the process, only
   * its own count rises, not those of messages that were merely received with it. Throws
   * InvalidIdError for an envelope without a usable id, and database errors as they are.
   */
  async noteStart(envelope: Envelope): Promise<number> {
    const id = resolveId(envelope, this.options.idOf);
    const res = await this.options.pool.query<{ starts: number }>(this.#sql.noteStart, [
      this.options.consumer,
      id,
      this.options.retentionMs,
    ]);
    return res.rows[0]!.starts;
  }

  /** Processes one envelope in its own transaction. Never throws for a message's sake: see {@link Outcome}. */
  async process(envelope: Envelope): Promise<Outcome<R>> {
    const started = performance.now();
    const [outcome] = await this.#processAll([envelope], false);
    this.#emit(outcome!, started);
    return outcome!;
  }

  /**
   * Processes envelopes in order with one COMMIT for the fresh ones. Redelivered envelopes run one
   * per transaction (any may be the message that killed the last consumer). A `retry` or `busy`
   * outcome stops the batch: every later envelope is `retry` with `ran: false`, so ordered brokers
   * can redeliver from there. Outcomes come back in input order.
   */
  async processBatch(envelopes: readonly Envelope[]): Promise<Outcome<R>[]> {
    const started = performance.now();
    const outcomes = await this.#processAll(envelopes, true);
    for (const o of outcomes) this.#emit(o, started);
    return outcomes;
  }

  async #processAll(envelopes: readonly Envelope[], batched: boolean): Promise<Outcome<R>[]> {
    const out: Outcome<R>[] = [];
    const items: Item[] = [];
    // Fresh fenced messages of one partition, in offset order, waiting for one transaction.
    const fenced: Item[] = [];
    try {
      await this.ready();
    } catch (err) {
      if (OnceError.is(err) && !err.retryable) throw err;
      return envelopes.map((e) => this.#out.retry(e, undefined, err, false, false));
    }
    // Lease mode: one message at a time, in order, stopping at the first retry or busy.
    if (this.#lease) return this.#lease.processAll(envelopes);
    let stopped = false;
    // At most one of `items` and `fenced` holds messages: each is flushed before the other fills.
    const flush = async (): Promise<void> => {
      if (items.length === 0 && fenced.length === 0) return;
      const run = items.splice(0, items.length);
      const fencedRun = fenced.splice(0, fenced.length);
      const results =
        fencedRun.length > 0
          ? await this.#fencedBatch(fencedRun)
          : run.length === 1
            ? [await this.#one(run[0]!)]
            : await this.#batch(run);
      for (const r of results) {
        out.push(r);
        if (isStop(r)) stopped = true;
      }
    };
    for (const envelope of envelopes) {
      if (stopped) {
        await flush();
        out.push(this.#out.notRun(envelope));
        continue;
      }
      let item: Item;
      try {
        item = {
          envelope,
          id: resolveId(envelope, this.options.idOf),
          fp: this.#fingerprint(envelope),
          fence: this.options.fenceOf ? resolveFence(envelope, this.options.fenceOf) : undefined,
        };
      } catch (err) {
        await flush();
        if (stopped) {
          out.push(this.#out.retry(envelope, undefined, err, false, false));
        } else {
          out.push(this.#out.failed(envelope, undefined, 'invalid-id', err));
        }
        continue;
      }
      const fresh = batched && !envelope.redelivered && envelope.attempt === 1;
      if (fresh && item.fence) {
        // Fenced messages batch per partition while their offsets rise; anything else flushes.
        const last = fenced[fenced.length - 1]?.fence;
        const f = item.fence;
        if (
          items.length > 0 ||
          (last && (last.stream !== f.stream || last.partition !== f.partition || last.offset >= f.offset))
        ) {
          await flush();
        }
        if (stopped) {
          out.push(this.#out.notRun(envelope, item.id));
          continue;
        }
        fenced.push(item);
        continue;
      }
      if (fenced.length > 0) {
        await flush();
        if (stopped) {
          out.push(this.#out.notRun(envelope, item.id));
          continue;
        }
      }
      if (!fresh || item.fence) {
        await flush();
        if (stopped) {
          out.push(this.#out.notRun(envelope, item.id));
          continue;
        }
        const r = await this.#one(item, envelope.redelivered || envelope.attempt > 1);
        out.push(r);
        if (isStop(r)) stopped = true;
      } else {
        items.push(item);
      }
    }
    await flush();
    return out;
  }

  #fingerprint(envelope: Envelope): Buffer {
    return fingerprint(this.options.fingerprintOf ? this.options.fingerprintOf(envelope) : envelope.body);
  }

  // ---------------------------------------------------------------- one message

  async #one(item: Item, redelivered = false): Promise<Outcome<R>> {
    if (item.fence) return this.#oneFenced(item, item.fence);
    const { pool, consumer } = this.options;
    if (redelivered) {
      // Duplicate short-cut: an autocommit read before any transaction. Only a committed row
      // is visible here, so a hit is certain; a miss proceeds to the real claim.
      try {
        const row = (await pool.query<Row>(this.#sql.readOne, [consumer, item.id])).rows[0];
        if (row) return this.#fromRow(item, row);
      } catch {
        // The transaction below meets the same fault and classifies it.
      }
    }
    let conn: Connection;
    try {
      conn = await Connection.open(pool);
    } catch (err) {
      return this.#out.retry(item.envelope, item.id, err, false, false);
    }
    try {
      // One round trip: BEGIN, its settings and the claim (see sql/literal.ts).
      const results = await stmt(
        conn.client.query(this.#beginAndClaim(consumer, item.id, item.fp, this.options.retentionMs)),
      );
      const claim = (Array.isArray(results) ? results[results.length - 1] : results) as QueryResultLike;
      if (claim.rowCount === 0) {
        // A new statement, so under READ COMMITTED it sees the rival that made us wait.
        const row = (await stmt(conn.client.query<Row>(this.#sql.readOne, [consumer, item.id]))).rows[0];
        await stmt(conn.client.query('ROLLBACK'));
        conn.release();
        return row
          ? this.#fromRow(item, row)
          : this.#out.retry(item.envelope, item.id, new Error('claim vanished'), false, false);
      }
      const run = await this.#runHandler(conn, item);
      if (!run.ok) return await this.#afterHandlerError(conn, item, run.error);
      if (this.options.storeResult) {
        await stmt(conn.client.query(this.#sql.storeResult, [consumer, item.id, run.json]));
      }
      const commit = await stmt(conn.client.query('COMMIT'));
      if (commit.command === 'ROLLBACK') {
        conn.release();
        return await this.#handlerFailed(item, rolledBackError());
      }
      conn.release();
      if (run.published) this.options.outbox?.wake();
      return { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
    } catch (err) {
      return await this.#afterStatementError(conn, [item], err);
    }
  }

  /**
   * A fenced message: the claim moves the partition's fence past the offset (or finds it already
   * past: a duplicate, or `failed` again when a failed row was recorded for the id). Effects and
   * the fence commit together. No inbox row is written for a processed message.
   */
  async #oneFenced(item: Item, fence: Fence): Promise<Outcome<R>> {
    const { pool, consumer } = this.options;
    let conn: Connection;
    try {
      conn = await Connection.open(pool);
    } catch (err) {
      return this.#out.retry(item.envelope, item.id, err, false, false);
    }
    try {
      const results = await stmt(
        conn.client.query(this.#beginAndFence(consumer, fence.stream, fence.partition, fence.offset)),
      );
      const claim = (Array.isArray(results) ? results[results.length - 1] : results) as QueryResultLike;
      if (claim.rowCount === 0) {
        // Below the fence. Only a recorded failure is told apart from a duplicate.
        const row = (await stmt(conn.client.query<Row>(this.#sql.readOne, [consumer, item.id]))).rows[0];
        await stmt(conn.client.query('ROLLBACK'));
        conn.release();
        if (row?.status === 'failed') return this.#fromRow(item, row);
        return { status: 'duplicate', id: item.id, envelope: item.envelope, result: undefined };
      }
      const run = await this.#runHandler(conn, item);
      if (!run.ok) return await this.#afterHandlerError(conn, item, run.error);
      const commit = await stmt(conn.client.query('COMMIT'));
      if (commit.command === 'ROLLBACK') {
        conn.release();
        return await this.#handlerFailed(item, rolledBackError());
      }
      conn.release();
      if (run.published) this.options.outbox?.wake();
      return { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
    } catch (err) {
      return await this.#afterStatementError(conn, [item], err);
    }
  }

  #runHandler(conn: Connection, item: Item): Promise<HandlerRun<R>> {
    const o = this.options;
    const started = performance.now();
    const run = runHandler(
      {
        handler: o.handler,
        client: conn.client,
        id: item.id,
        consumer: o.consumer,
        timeoutMs: o.handlerTimeoutMs,
        storeResult: o.storeResult,
        outbox: o.outbox,
      },
      item.envelope,
    );
    return this.#events.has('handler:settled') ? run.then((r) => this.#settled(item, r, started)) : run;
  }

  #settled(item: Item, run: HandlerRun<R>, started: number): HandlerRun<R> {
    this.#events.emit('handler:settled', {
      consumer: this.options.consumer,
      id: item.id,
      source: item.envelope.source,
      durationMs: performance.now() - started,
      error: run.ok ? undefined : serializeError(run.error),
    });
    return run;
  }

  /** The handler threw: undo its work, then record or retry per classification. */
  async #afterHandlerError(conn: Connection, item: Item, error: unknown): Promise<Outcome<R>> {
    await this.#rollback(conn, error);
    return this.#handlerFailed(item, error);
  }

  /**
   * Rolls back and returns the connection, or destroys it when its state is in doubt (a handler
   * past its deadline may still be using it; a dead socket cannot roll back).
   */
  async #rollback(conn: Connection, cause: unknown): Promise<void> {
    if (cause instanceof DeadlineError || classifyDbError(cause) === 'connection' || conn.error) {
      conn.destroy(cause);
      return;
    }
    try {
      await conn.client.query('ROLLBACK');
      conn.release();
    } catch (err) {
      conn.destroy(err);
    }
  }

  /** Our own statement failed (claim, read, COMMIT): the whole transaction is gone. */
  async #afterStatementError(conn: Connection, items: Item[], err: unknown): Promise<Outcome<R>> {
    const cause = err instanceof StatementError ? err.original : err;
    const kind = classifyDbError(cause);
    await this.#rollback(conn, cause);
    if (kind === 'schema-missing') {
      this.#ready = undefined;
    }
    const first = items[0]!;
    if (kind === 'busy' || (kind === 'conflict-retry' && this.options.isolation !== 'read committed')) {
      return { status: 'busy', id: first.id, envelope: first.envelope, delayMs: this.options.busyDelayMs };
    }
    // A COMMIT whose outcome is unknown lands here too: `retry`, and the claim decides on redelivery.
    return this.#out.retry(first.envelope, first.id, cause, true, false);
  }

  /** Classifies a handler failure: `retry`, or a `failed` row written in its own transaction. */
  async #handlerFailed(item: Item, error: unknown): Promise<Outcome<R>> {
    const db = classifyDbError(error);
    if (db === 'connection' || db === 'conflict-retry' || db === 'busy' || error instanceof DeadlineError) {
      // The database's fault, not the message's: retry without spending its attempts budget.
      // A handler past its deadline did spend one, and fails at maxAttempts.
      const deadline = error instanceof DeadlineError;
      if (!deadline || item.envelope.attempt < this.options.maxAttempts) {
        return this.#out.retry(item.envelope, item.id, error, true, deadline);
      }
    }
    let reason: FailReason | undefined;
    const verdict = PermanentError.is(error) ? 'permanent' : this.#out.classify(error);
    if (verdict === 'permanent') reason = 'permanent';
    else if (item.envelope.attempt >= this.options.maxAttempts) reason = 'max-attempts';
    if (!reason) return this.#out.retry(item.envelope, item.id, error, true, true);
    return this.#recordFailed(item, reason, error);
  }

  async #recordFailed(item: Item, reason: FailReason, error: unknown): Promise<Outcome<R>> {
    const { pool, consumer, retentionMs, failedBodyMaxBytes } = this.options;
    const body = item.envelope.body.subarray(0, failedBodyMaxBytes);
    const truncated = item.envelope.body.length > failedBodyMaxBytes;
    const serialized = serializeError(error);
    const fence = item.fence;
    try {
      const params: unknown[] = [
        consumer,
        item.id,
        item.fp,
        retentionMs,
        JSON.stringify({ ...serialized, reason }),
        body,
        truncated,
        item.envelope.attempt,
      ];
      const origin = originOf(item.envelope);
      const res = fence
        ? await pool.query(this.#fenceSql.recordFailed, [
            ...params,
            fence.stream,
            fence.partition,
            fence.offset.toString(),
            origin,
          ])
        : await pool.query(this.#sql.recordFailed, [...params, origin]);
      if (res.rowCount === 0) {
        // Someone recorded the id meanwhile (a rival processed it, or failed it first).
        const row = (await pool.query<Row>(this.#sql.readOne, [consumer, item.id])).rows[0];
        if (row) return this.#fromRow(item, row);
        // Fenced: a rival moved the fence past the message (it processed it).
        if (fence) return { status: 'duplicate', id: item.id, envelope: item.envelope, result: undefined };
      }
    } catch (err) {
      // Not recorded: nothing is lost, the redelivery runs the message again.
      return this.#out.retry(item.envelope, item.id, err, true, false);
    }
    return this.#out.failed(item.envelope, item.id, reason, error);
  }

  /** Maps a stored row to the outcome of a later delivery of its id. */
  #fromRow(item: Item, row: Row): Outcome<R> {
    const same = Buffer.compare(Buffer.from(row.fingerprint), item.fp) === 0;
    const conflict = this.#out.conflict(item.envelope, item.id, same);
    if (conflict) return conflict;
    if (row.status === 'in_progress') {
      // Held by a lease-mode consumer of the same name (one mode per consumer): not done yet.
      return { status: 'busy', id: item.id, envelope: item.envelope, delayMs: this.options.busyDelayMs };
    }
    if (row.status === 'failed') {
      return this.#out.failed(
        item.envelope,
        item.id,
        'previously-failed',
        new Error('this id was recorded as failed earlier'),
      );
    }
    return {
      status: 'duplicate',
      id: item.id,
      envelope: item.envelope,
      result: (row.result ?? undefined) as R | undefined,
    };
  }

  // ---------------------------------------------------------------- batches

  /**
   * One transaction for many fresh messages. The invariant: the committed batch holds claims
   * only for messages that were processed in it or recorded failed; a message that did not run,
   * or whose work was rolled back, leaves no claim behind.
   */
  async #batch(all: Item[]): Promise<Outcome<R>[]> {
    // Repeats of an id inside the batch follow the first copy's fate.
    const firstIndex = new Map<string, number>();
    const unique: Item[] = [];
    for (const item of all) {
      if (!firstIndex.has(item.id)) {
        firstIndex.set(item.id, unique.length);
        unique.push(item);
      }
    }
    const uniqueOutcomes = await this.#batchUnique(unique);
    const seen = new Set<string>();
    return all.map((item) => {
      const first = uniqueOutcomes[firstIndex.get(item.id)!]!;
      if (!seen.has(item.id)) {
        seen.add(item.id);
        return first;
      }
      return this.#repeatOf(item, first);
    });
  }

  #repeatOf(item: Item, first: Outcome<R>): Outcome<R> {
    if (first.status === 'processed' || first.status === 'duplicate') {
      const fp = this.#fingerprint(first.envelope);
      const row: Row = { message_id: item.id, status: 'done', fingerprint: fp, result: first.result };
      return this.#fromRow(item, row);
    }
    if (first.status === 'failed')
      return this.#out.failed(item.envelope, item.id, 'previously-failed', first.error);
    if (first.status === 'conflict') return { ...first, envelope: item.envelope };
    if (first.status === 'busy') return { ...first, envelope: item.envelope };
    return this.#out.retry(item.envelope, item.id, first.error, false, false);
  }

  async #batchUnique(items: Item[]): Promise<Outcome<R>[]> {
    if (items.length === 0) return [];
    if (items.length === 1) return [await this.#one(items[0]!)];
    const { pool, consumer, retentionMs } = this.options;
    let conn: Connection;
    try {
      conn = await Connection.open(pool);
    } catch (err) {
      return items.map((it) => this.#out.retry(it.envelope, it.id, err, false, false));
    }
    const outcomes: (Outcome<R> | undefined)[] = new Array(items.length);
    try {
      await stmt(conn.client.query(this.#begin));
      const sorted = [...items].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      let claimedRows: { message_id: string }[];
      try {
        claimedRows = (
          await conn.client.query<{ message_id: string }>(this.#sql.claimMany, [
            consumer,
            sorted.map((i) => i.id),
            sorted.map((i) => i.fp),
            retentionMs,
          ])
        ).rows;
      } catch (err) {
        if (classifyDbError(err) !== 'busy') throw new StatementError(err);
        // A rival holds one of the ids past the wait bound: claim one by one instead, so the
        // others need not wait for it.
        await this.#rollback(conn, err);
        return await this.#sequential(items);
      }
      const claimed = new Set(claimedRows.map((r) => r.message_id));
      const unclaimed = items.filter((i) => !claimed.has(i.id)).map((i) => i.id);
      if (unclaimed.length > 0) {
        const rows = (await stmt(conn.client.query<Row>(this.#sql.readMany, [consumer, unclaimed]))).rows;
        const byId = new Map(rows.map((r) => [r.message_id, r]));
        items.forEach((item, k) => {
          if (claimed.has(item.id)) return;
          const row = byId.get(item.id);
          outcomes[k] = row
            ? this.#fromRow(item, row)
            : this.#out.retry(item.envelope, item.id, new Error('claim vanished'), false, false);
        });
      }
      const results: { id: string; json: string | null }[] = [];
      let published = false;
      const savepoints = this.options.batchMode === 'savepoint';
      for (let k = 0; k < items.length; k++) {
        const item = items[k]!;
        if (!claimed.has(item.id)) continue;
        if (savepoints) await stmt(conn.client.query('SAVEPOINT once_message'));
        const run = await this.#runHandler(conn, item);
        if (run.ok) {
          if (savepoints) await stmt(conn.client.query('RELEASE SAVEPOINT once_message'));
          outcomes[k] = { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
          published ||= run.published;
          if (this.options.storeResult) results.push({ id: item.id, json: run.json });
          continue;
        }
        if (
          !savepoints ||
          run.error instanceof DeadlineError ||
          classifyDbError(run.error) === 'connection' ||
          conn.error
        ) {
          // Optimistic: roll everything back and replay with the failing message isolated.
          await this.#rollback(conn, run.error);
          return await this.#replay(items, k, run.error, (some) => this.#batchUnique(some));
        }
        await stmt(conn.client.query('ROLLBACK TO SAVEPOINT once_message'));
        const verdict = await this.#savepointFailure(conn, item, run.error);
        outcomes[k] = verdict;
        if (isStop(verdict)) {
          // Unclaim this message and every later claimed one that has not run.
          const unrun = items
            .slice(k)
            .filter((i) => claimed.has(i.id))
            .map((i) => i.id);
          await stmt(conn.client.query(this.#sql.unclaim, [consumer, unrun]));
          for (let j = k + 1; j < items.length; j++) {
            const later = items[j]!;
            if (claimed.has(later.id) || !outcomes[j]) {
              outcomes[j] = this.#out.notRun(later.envelope, later.id);
            }
          }
          break;
        }
      }
      if (results.length > 0) {
        await stmt(
          conn.client.query(this.#sql.storeResults, [
            consumer,
            results.map((r) => r.id),
            results.map((r) => r.json),
          ]),
        );
      }
      const commit = await stmt(conn.client.query('COMMIT'));
      if (commit.command === 'ROLLBACK') {
        conn.release();
        return items.map((it) => this.#out.retry(it.envelope, it.id, rolledBackError(), true, false));
      }
      conn.release();
      if (published) this.options.outbox?.wake();
      return outcomes.map((o, k) => o ?? this.#out.notRun(items[k]!.envelope, items[k]!.id));
    } catch (err) {
      return await this.#batchStatementError(conn, items, err);
    }
  }

  /**
   * Fresh fenced messages of one partition, in rising offset order, in one transaction: lock the
   * fence, take what lies below it for duplicates (or `failed` again, where a failure was
   * recorded), run the rest and move the fence past the last. No inbox row is written. A handler
   * failure rolls it all back (optimistic, as in #batchUnique): the prefix runs again as a batch,
   * the failing message is classified alone (a permanent failure moves the fence past it), then
   * the rest.
   */
  async #fencedBatch(items: Item[]): Promise<Outcome<R>[]> {
    if (items.length === 0) return [];
    if (items.length === 1) return [await this.#one(items[0]!)];
    const { pool, consumer } = this.options;
    const fence = items[0]!.fence!;
    let conn: Connection;
    try {
      conn = await Connection.open(pool);
    } catch (err) {
      return items.map((it) => this.#out.retry(it.envelope, it.id, err, false, false));
    }
    const outcomes: Outcome<R>[] = new Array(items.length);
    try {
      const results = await stmt(
        conn.client.query(this.#beginAndLockFence(consumer, fence.stream, fence.partition, fence.offset)),
      );
      const locked = (Array.isArray(results) ? results[results.length - 1] : results) as QueryResultLike<{
        next_offset: string;
      }>;
      const next = BigInt(locked.rows[0]!.next_offset);
      const below = items.filter((it) => it.fence!.offset < next);
      if (below.length > 0) {
        const rows = (
          await stmt(conn.client.query<Row>(this.#sql.readMany, [consumer, below.map((it) => it.id)]))
        ).rows;
        const failed = new Map(rows.filter((r) => r.status === 'failed').map((r) => [r.message_id, r]));
        items.forEach((it, k) => {
          if (it.fence!.offset >= next) return;
          const row = failed.get(it.id);
          outcomes[k] = row
            ? this.#fromRow(it, row)
            : { status: 'duplicate', id: it.id, envelope: it.envelope, result: undefined };
        });
      }
      let published = false;
      let last: bigint | undefined;
      for (let k = 0; k < items.length; k++) {
        if (outcomes[k]) continue;
        const item = items[k]!;
        const run = await this.#runHandler(conn, item);
        if (!run.ok) {
          await this.#rollback(conn, run.error);
          return await this.#replay(items, k, run.error, (some) => this.#fencedBatch(some));
        }
        outcomes[k] = { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
        published ||= run.published;
        last = item.fence!.offset;
      }
      if (last === undefined) {
        await stmt(conn.client.query('ROLLBACK'));
        conn.release();
        return outcomes;
      }
      await stmt(
        conn.client.query(this.#fenceSql.advance, [
          consumer,
          fence.stream,
          fence.partition,
          (last + 1n).toString(),
        ]),
      );
      const commit = await stmt(conn.client.query('COMMIT'));
      if (commit.command === 'ROLLBACK') {
        conn.release();
        return items.map((it) => this.#out.retry(it.envelope, it.id, rolledBackError(), true, false));
      }
      conn.release();
      if (published) this.options.outbox?.wake();
      return outcomes;
    } catch (err) {
      return await this.#batchStatementError(conn, items, err);
    }
  }

  /**
   * Savepoint mode: the handler's work is undone, its claim is still held. A permanent failure
   * turns the claim into a failed record; a transient one returns `retry` (the caller unclaims).
   */
  async #savepointFailure(conn: Connection, item: Item, error: unknown): Promise<Outcome<R>> {
    const db = classifyDbError(error);
    let reason: FailReason | undefined;
    if (db === 'other') {
      const verdict = PermanentError.is(error) ? 'permanent' : this.#out.classify(error);
      if (verdict === 'permanent') reason = 'permanent';
      else if (item.envelope.attempt >= this.options.maxAttempts) reason = 'max-attempts';
    }
    if (!reason) return this.#out.retry(item.envelope, item.id, error, true, true);
    const max = this.options.failedBodyMaxBytes;
    await stmt(
      conn.client.query(this.#sql.markFailed, [
        this.options.consumer,
        item.id,
        JSON.stringify({ ...serializeError(error), reason }),
        item.envelope.body.subarray(0, max),
        item.envelope.body.length > max,
        item.envelope.attempt,
        originOf(item.envelope),
      ]),
    );
    return this.#out.failed(item.envelope, item.id, reason, error);
  }

  /**
   * Optimistic replay after handler k of a batch failed and the batch was rolled back: the
   * prefix again as a batch (`batch`: inbox or fenced), k classified alone (its work was rolled
   * back; a permanent verdict records it, and on the fenced path moves the fence past it), then
   * the rest as a batch.
   */
  async #replay(
    items: Item[],
    k: number,
    error: unknown,
    batch: (some: Item[]) => Promise<Outcome<R>[]>,
  ): Promise<Outcome<R>[]> {
    const notRun = (from: Item[]) => from.map((it) => this.#out.notRun(it.envelope, it.id));
    const prefix = await batch(items.slice(0, k));
    if (prefix.some(isStop)) return [...prefix, ...notRun(items.slice(k))];
    const failing = await this.#handlerFailed(items[k]!, error);
    if (isStop(failing)) return [...prefix, failing, ...notRun(items.slice(k + 1))];
    return [...prefix, failing, ...(await batch(items.slice(k + 1)))];
  }

  /** A statement of a batch failed: roll back, and give every message the verdict of the first. */
  async #batchStatementError(conn: Connection, items: Item[], err: unknown): Promise<Outcome<R>[]> {
    const first = await this.#afterStatementError(conn, items, err);
    if (first.status === 'busy') return items.map((it) => ({ ...first, id: it.id, envelope: it.envelope }));
    return items.map((it) =>
      this.#out.retry(it.envelope, it.id, (first as { error?: unknown }).error ?? err, true, false),
    );
  }

  async #sequential(items: Item[]): Promise<Outcome<R>[]> {
    const out: Outcome<R>[] = [];
    for (const item of items) {
      if (out.length > 0 && isStop(out[out.length - 1]!)) {
        out.push(this.#out.notRun(item.envelope, item.id));
        continue;
      }
      out.push(await this.#one(item));
    }
    return out;
  }

  // ---------------------------------------------------------------- outcomes and events

  #emit(o: Outcome<R>, started: number): void {
    if (!this.#events.has(`message:${o.status}`)) return;
    const base = {
      consumer: this.options.consumer,
      source: o.envelope.source,
      durationMs: performance.now() - started,
    };
    const ev = this.#events;
    if (o.status === 'processed') ev.emit('message:processed', { ...base, id: o.id });
    else if (o.status === 'duplicate') ev.emit('message:duplicate', { ...base, id: o.id });
    else if (o.status === 'conflict') ev.emit('message:conflict', { ...base, id: o.id, action: o.action });
    else if (o.status === 'failed')
      ev.emit('message:failed', { ...base, id: o.id, reason: o.reason, error: o.error });
    else if (o.status === 'retry') {
      ev.emit('message:retry', { ...base, id: o.id, error: o.error, delayMs: o.delayMs, ran: o.ran });
    } else ev.emit('message:busy', { ...base, id: o.id });
  }
}

function isStop(o: Outcome): boolean {
  return o.status === 'retry' || o.status === 'busy';
}

function rolledBackError(): OnceError {
  return new OnceError(
    ErrorCode.CommitRolledBack,
    'COMMIT rolled the transaction back: a statement inside it had failed (did the handler catch a query error and carry on?)',
    { retryable: true },
  );
}

/** Tags a failure of one of our own statements so handler errors and ours stay apart. */
async function stmt<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw new StatementError(err);
  }
}

/** Creates an {@link Inbox}; validates the options and names the first bad field. */
export function createInbox<R = unknown>(options: InboxOptions<R>): Inbox<R> {
  return new Inbox(resolveInboxOptions(options));
}
