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
import { fromJsonb, toJsonb } from './sql/jsonb.js';
import { classifyDbError, isEnvironmental } from './sqlstate.js';
import { type Verdict, verdictOf } from './verdict.js';

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
  readonly #beginAndFence: (
    consumer: string,
    stream: string,
    partition: number,
    offset: bigint,
    id: string,
    fp: Buffer,
  ) => string;
  readonly #beginAndLockFence: (consumer: string, stream: string, partition: number, first: bigint) => string;
  /** Set in lease mode, which processes every message through it. */
  readonly #lease: LeaseProcessor<R> | undefined;
  #ready: Promise<void> | undefined;
  /** The last outcome said the database or the schema could not be used. */
  #unavailable = false;
  /** Until when (performance.now() ms) fresh messages are not batched: see #noteBatchRace. */
  #unbatchedUntil = 0;
  /** A setup fault was logged; reset when the schema checks out again. */
  #setupFaultLogged = false;

  constructor(options: ResolvedInboxOptions<R>) {
    this.options = options;
    guardNewClients(options.pool, options.logger);
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
  /**
   * False while the inbox cannot process messages: the database is unreachable, or once's schema
   * is missing or too new. Messages then come back `not-run` (`unavailable`). True again once a
   * message reaches the database. Adapters fold it into their `health()`.
   */
  get available(): boolean {
    return !this.#unavailable;
  }

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
      this.#ready = checkSchema(this.options.pool, this.options.schema).then(
        () => {
          this.#setupFaultLogged = false;
        },
        (err: unknown) => {
          this.#ready = undefined;
          throw err;
        },
      );
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

  /**
   * Takes back one start counted by {@link noteStart} whose run ended without spending an attempt
   * (a fault of the environment: a lost connection, a deadlock, a timeout), so that the count is
   * that of runs that were the message's own. Throws database errors as they are.
   */
  async forgetStart(envelope: Envelope): Promise<void> {
    const id = resolveId(envelope, this.options.idOf);
    await this.options.pool.query(this.#sql.forgetStart, [this.options.consumer, id]);
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
   * per transaction (any may be the message that killed the last consumer). A `retry`, `busy` or
   * `not-run` outcome stops the batch: every later envelope is `not-run` (`behind`), so ordered
   * brokers can redeliver from there. Outcomes come back in input order. Never throws for a
   * message's sake, setup faults included.
   */
  async processBatch(envelopes: readonly Envelope[]): Promise<Outcome<R>[]> {
    const started = performance.now();
    const outcomes = await this.#processAll(envelopes, true);
    for (const o of outcomes) this.#emit(o, started);
    return outcomes;
  }

  async #processAll(envelopes: readonly Envelope[], wantBatch: boolean): Promise<Outcome<R>[]> {
    // After a batch deadlocked on the handlers' own rows, batches run one message per transaction
    // for a while: each such deadlock costs deadlock_timeout while other batches queue behind it.
    const batched = wantBatch && performance.now() >= this.#unbatchedUntil;
    const out: Outcome<R>[] = [];
    const items: Item[] = [];
    // Fresh fenced messages of one partition, in offset order, waiting for one transaction.
    const fenced: Item[] = [];
    try {
      await this.ready();
    } catch (err) {
      // A setup fault (schema missing or too new, database unreachable) is never the messages':
      // none of them ran, none is spent or dead-lettered.
      this.#setupFault(err);
      return envelopes.map((e) => this.#out.unavailable(e, undefined, err));
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
      let id: string;
      try {
        id = resolveId(envelope, this.options.idOf);
      } catch (err) {
        await flush();
        out.push(
          stopped ? this.#out.notRun(envelope) : this.#out.failed(envelope, undefined, 'invalid-id', err),
        );
        continue;
      }
      let item: Item;
      try {
        item = {
          envelope,
          id,
          fp: this.#fingerprint(envelope),
          fence: this.options.fenceOf ? resolveFence(envelope, this.options.fenceOf) : undefined,
        };
      } catch (err) {
        // The id is good, so the failure can be recorded under it: a throwing fingerprintOf or
        // fenceOf is the message's permanent failure, not a missing id.
        await flush();
        if (stopped) {
          out.push(this.#out.notRun(envelope, id));
          continue;
        }
        const which = this.options.fenceOf ? 'fingerprintOf or fenceOf' : 'fingerprintOf';
        const error = new PermanentError(`${which} threw: ${serializeError(err).message}`, { cause: err });
        const r = await this.#recordFailed(
          { envelope, id, fp: fingerprint(envelope.body) },
          'permanent',
          error,
        );
        out.push(r);
        if (isStop(r)) stopped = true;
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

  /**
   * One message in its own transaction. A deadlock or serialization failure among the handlers'
   * writes is a race lost, not a fault: the transaction runs again at once (a few times) instead
   * of going back to the broker, whose redelivery can take seconds (a visibility timeout, a long
   * poll) while the rows it raced for are long free.
   */
  async #one(item: Item, redelivered = false): Promise<Outcome<R>> {
    for (let run = 1; ; run++) {
      const o = await this.#oneRun(item, redelivered);
      if (run >= RACE_RUNS || o.status !== 'retry' || o.spent) return o;
      if (o.error.code !== '40P01' && o.error.code !== '40001') return o;
    }
  }

  async #oneRun(item: Item, redelivered: boolean): Promise<Outcome<R>> {
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
      return this.#out.unavailable(item.envelope, item.id, err);
    }
    let started = false;
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
        return row ? this.#fromRow(item, row) : this.#out.retry(item.envelope, item.id, vanished(), false);
      }
      started = true;
      const run = await this.#runHandler(conn, item);
      if (!run.ok) return await this.#afterHandlerError(conn, item, run.error);
      if (this.options.storeResult) {
        await stmt(conn.client.query(this.#sql.storeResult, [consumer, item.id, run.json]));
      }
      return await this.#commit(conn, item, run);
    } catch (err) {
      return await this.#afterStatementError(conn, item, err, started);
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
      return this.#out.unavailable(item.envelope, item.id, err);
    }
    let started = false;
    try {
      const results = await stmt(
        conn.client.query(
          this.#beginAndFence(consumer, fence.stream, fence.partition, fence.offset, item.id, item.fp),
        ),
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
      started = true;
      const run = await this.#runHandler(conn, item);
      if (!run.ok) return await this.#afterHandlerError(conn, item, run.error);
      return await this.#commit(conn, item, run);
    } catch (err) {
      return await this.#afterStatementError(conn, item, err, started);
    }
  }

  /**
   * COMMIT of a single message. A COMMIT that answers ROLLBACK (a statement inside had failed and
   * the handler carried on) is the handler's failure; a COMMIT that throws is classified as any
   * statement error by the caller (a deferred constraint: the message's; a lost reply: retry, and
   * the claim decides on redelivery).
   */
  async #commit(conn: Connection, item: Item, run: HandlerRun<R> & { ok: true }): Promise<Outcome<R>> {
    const commit = await stmt(conn.client.query('COMMIT'));
    conn.release();
    if (commit.command === 'ROLLBACK') return await this.#handlerFailed(item, rolledBackError());
    if (run.published) this.options.outbox?.wake();
    return { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
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

  /**
   * One of our own statements failed (claim, read, stored result, COMMIT): the transaction is
   * gone. `started`: the handler had been given the message.
   */
  async #afterStatementError(
    conn: Connection,
    item: Item,
    err: unknown,
    started: boolean,
  ): Promise<Outcome<R>> {
    const cause = err instanceof StatementError ? err.original : err;
    await this.#rollback(conn, cause);
    const verdict = this.#verdict(item, cause, 'statement');
    if (!started && verdict.kind === 'retry' && !verdict.spent) {
      return this.#out.unavailable(item.envelope, item.id, cause);
    }
    // A COMMIT whose outcome is unknown lands in `retry`: the claim decides on redelivery.
    return this.#settleVerdict(item, verdict, cause);
  }

  /** Classifies a handler failure: `retry`, or a `failed` row written in its own transaction. */
  #handlerFailed(item: Item, error: unknown): Promise<Outcome<R>> {
    return this.#settleVerdict(item, this.#verdict(item, error, 'handler'), error);
  }

  #verdict(item: Item, error: unknown, where: 'handler' | 'statement'): Verdict {
    const o = this.options;
    return verdictOf(error, where, {
      attempt: item.envelope.attempt,
      maxAttempts: o.maxAttempts,
      classify: this.#out.classify,
      isolation: o.isolation,
    });
  }

  async #settleVerdict(item: Item, verdict: Verdict, error: unknown): Promise<Outcome<R>> {
    switch (verdict.kind) {
      case 'retry':
        return this.#out.retry(item.envelope, item.id, error, verdict.spent);
      case 'busy':
        return this.#out.busy(item.envelope, item.id, this.options.busyDelayMs);
      case 'unavailable':
        this.#setupFault(error);
        return this.#out.unavailable(item.envelope, item.id, error);
      case 'fail':
        return await this.#recordFailed(item, verdict.reason, error);
    }
  }

  /**
   * A batch met a deadlock or serialization failure among its handlers' writes: the messages'
   * own rows cross between concurrent batches (several messages of one account spread over
   * receives, say). Each such deadlock is found only after deadlock_timeout, so for the next
   * BATCH_PAUSE_MS this inbox runs fresh messages one per transaction, which cannot deadlock on
   * one row each; then it tries batching again.
   */
  #noteBatchRace(error: unknown): void {
    if (classifyDbError(error) !== 'conflict-retry') return;
    if (performance.now() >= this.#unbatchedUntil) {
      this.options.logger.info('once: a batch deadlocked on the handlers’ rows; batching paused', {
        consumer: this.options.consumer,
        pauseMs: BATCH_PAUSE_MS,
      });
    }
    this.#unbatchedUntil = performance.now() + BATCH_PAUSE_MS;
  }

  /** Forget that the schema was checked, so the next message checks again; say so once. */
  #setupFault(err: unknown): void {
    this.#ready = undefined;
    if (this.#setupFaultLogged) return;
    this.#setupFaultLogged = true;
    this.options.logger.error(
      'once: the inbox cannot process messages; they are not run and will be redelivered',
      {
        consumer: this.options.consumer,
        error: serializeError(err).message,
      },
    );
  }

  /**
   * Records the message `failed` in its own transaction, so its redeliveries are recognised at
   * once. The verdict stands whatever happens here: when the full record cannot be stored (what
   * the error or the origin holds is refused), a minimal one is, and the message is dead-lettered
   * either way. Only when the database cannot be reached is it `retry`, unspent: the redelivery
   * comes to the same verdict and records it then.
   */
  async #recordFailed(
    item: Pick<Item, 'envelope' | 'id' | 'fp' | 'fence'>,
    reason: FailReason,
    error: unknown,
  ): Promise<Outcome<R>> {
    const { pool, consumer, retentionMs, failedBodyMaxBytes } = this.options;
    const { envelope, id, fence } = item;
    const serialized = serializeError(error);
    const insert = (
      errorJson: string | null,
      body: Buffer | null,
      truncated: boolean,
      origin: string | null,
    ) => {
      const params: unknown[] = [
        consumer,
        id,
        item.fp,
        retentionMs,
        errorJson,
        body,
        truncated,
        envelope.attempt,
      ];
      return fence
        ? pool.query(this.#fenceSql.recordFailed, [
            ...params,
            fence.stream,
            fence.partition,
            fence.offset.toString(),
            origin,
          ])
        : pool.query(this.#sql.recordFailed, [...params, origin]);
    };
    let res: QueryResultLike;
    try {
      res = await insert(
        toJsonb({ ...serialized, reason }),
        envelope.body.subarray(0, failedBodyMaxBytes),
        envelope.body.length > failedBodyMaxBytes,
        toJsonb(JSON.parse(originOf(envelope))),
      );
    } catch (err) {
      if (isEnvironmental(classifyDbError(err))) {
        return this.#out.retry(envelope, id, err, false);
      }
      const minimal = {
        name: serialized.name,
        message: `the full failure record could not be stored (${serializeError(err).message}); the message was dead-lettered with its error`,
        reason,
      };
      try {
        res = await insert(JSON.stringify(minimal), null, envelope.body.length > 0, null);
      } catch (again) {
        if (isEnvironmental(classifyDbError(again))) {
          return this.#out.retry(envelope, id, again, false);
        }
        this.options.logger.error('once: a failed message could not be recorded; dead-lettering it anyway', {
          consumer,
          id,
          error: serializeError(again).message,
        });
        return this.#out.failed(envelope, id, reason, error);
      }
    }
    if (res.rowCount === 0) {
      // Someone recorded the id meanwhile (a rival processed it, or failed it first).
      try {
        const row = (await pool.query<Row>(this.#sql.readOne, [consumer, id])).rows[0];
        if (row) return this.#fromRow({ envelope, id, fp: item.fp }, row);
      } catch (err) {
        return this.#out.retry(envelope, id, err, false);
      }
      // Fenced: a rival moved the fence past the message (it processed it).
      if (fence) return { status: 'duplicate', id, envelope, result: undefined };
    }
    return this.#out.failed(envelope, id, reason, error);
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
      result: (row.result === null || row.result === undefined ? undefined : fromJsonb(row.result)) as
        | R
        | undefined,
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
    if (first.status === 'not-run') return { ...first, id: item.id, envelope: item.envelope };
    // The first copy failed transiently: this one never ran, and goes when the first does.
    return this.#out.notRun(item.envelope, item.id);
  }

  async #batchUnique(items: Item[]): Promise<Outcome<R>[]> {
    if (items.length === 0) return [];
    if (items.length === 1) return [await this.#one(items[0]!)];
    const { pool, consumer, retentionMs } = this.options;
    let conn: Connection;
    try {
      conn = await Connection.open(pool);
    } catch (err) {
      return items.map((it) => this.#out.unavailable(it.envelope, it.id, err));
    }
    const outcomes: (Outcome<R> | undefined)[] = new Array(items.length);
    let started = false;
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
            : this.#out.retry(item.envelope, item.id, vanished(), false);
        });
      }
      started = true;
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
        if (poisonsBatch(run.error)) {
          this.#noteBatchRace(run.error);
          // Not this handler's own doing alone (a deadlock on the handlers' rows, a transaction an
          // earlier handler let fail): the same batch would meet it again. One message per
          // transaction, at once.
          await this.#rollback(conn, run.error);
          return await this.#sequential(items);
        }
        if (!savepoints || run.error instanceof DeadlineError || conn.error) {
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
      conn.release();
      // COMMIT answered ROLLBACK: some handler let a statement fail and carried on. Which one is
      // found by running each alone.
      if (commit.command === 'ROLLBACK') return await this.#sequential(items);
      if (published) this.options.outbox?.wake();
      return outcomes.map((o, k) => o ?? this.#out.notRun(items[k]!.envelope, items[k]!.id));
    } catch (err) {
      return await this.#batchStatementError(conn, items, err, started);
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
      return items.map((it) => this.#out.unavailable(it.envelope, it.id, err));
    }
    const outcomes: Outcome<R>[] = new Array(items.length);
    let started = false;
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
      started = true;
      let published = false;
      let last: Item | undefined;
      for (let k = 0; k < items.length; k++) {
        if (outcomes[k]) continue;
        const item = items[k]!;
        const run = await this.#runHandler(conn, item);
        if (!run.ok) {
          await this.#rollback(conn, run.error);
          if (poisonsBatch(run.error)) {
            this.#noteBatchRace(run.error);
            return await this.#sequential(items);
          }
          return await this.#replay(items, k, run.error, (some) => this.#fencedBatch(some));
        }
        outcomes[k] = { status: 'processed', id: item.id, envelope: item.envelope, result: run.result };
        published ||= run.published;
        last = item;
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
          (last.fence!.offset + 1n).toString(),
          last.id,
          last.fp,
        ]),
      );
      const commit = await stmt(conn.client.query('COMMIT'));
      conn.release();
      if (commit.command === 'ROLLBACK') return await this.#sequential(items);
      if (published) this.options.outbox?.wake();
      return outcomes;
    } catch (err) {
      return await this.#batchStatementError(conn, items, err, started);
    }
  }

  /**
   * Savepoint mode: the handler's work is undone, its claim is still held. A permanent failure
   * turns the claim into a failed record; a transient one returns `retry` (the caller unclaims).
   */
  async #savepointFailure(conn: Connection, item: Item, error: unknown): Promise<Outcome<R>> {
    const verdict = this.#verdict(item, error, 'handler');
    if (verdict.kind !== 'fail') {
      return verdict.kind === 'retry'
        ? this.#out.retry(item.envelope, item.id, error, verdict.spent)
        : this.#out.unavailable(item.envelope, item.id, error);
    }
    const max = this.options.failedBodyMaxBytes;
    await stmt(
      conn.client.query(this.#sql.markFailed, [
        this.options.consumer,
        item.id,
        toJsonb({ ...serializeError(error), reason: verdict.reason }),
        item.envelope.body.subarray(0, max),
        item.envelope.body.length > max,
        item.envelope.attempt,
        toJsonb(JSON.parse(originOf(item.envelope))),
      ]),
    );
    return this.#out.failed(item.envelope, item.id, verdict.reason, error);
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

  /**
   * A statement of a batch failed (the claim, stored results, COMMIT): the transaction is gone.
   * A fault of the environment is every message's verdict, unspent; anything else (a deferred
   * constraint at COMMIT, a statement the handlers' work made fail) is some message's own doing,
   * found by running each alone.
   */
  async #batchStatementError(
    conn: Connection,
    items: Item[],
    err: unknown,
    started: boolean,
  ): Promise<Outcome<R>[]> {
    const cause = err instanceof StatementError ? err.original : err;
    await this.#rollback(conn, cause);
    const verdict = this.#verdict(items[0]!, cause, 'statement');
    if (verdict.kind === 'busy') {
      return items.map((it) => this.#out.busy(it.envelope, it.id, this.options.busyDelayMs));
    }
    if (verdict.kind === 'unavailable' || (verdict.kind === 'retry' && !verdict.spent)) {
      if (verdict.kind === 'unavailable') this.#setupFault(cause);
      return items.map((it) =>
        started && verdict.kind === 'retry'
          ? this.#out.retry(it.envelope, it.id, cause, false)
          : this.#out.unavailable(it.envelope, it.id, cause),
      );
    }
    return await this.#sequential(items);
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
    if (o.status === 'not-run') {
      if (o.why === 'unavailable') this.#unavailable = true;
    } else if (o.status !== 'retry' || o.spent) {
      this.#unavailable = false;
    }
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
      ev.emit('message:retry', { ...base, id: o.id, error: o.error, delayMs: o.delayMs, spent: o.spent });
    } else if (o.status === 'not-run') {
      ev.emit('message:not-run', { ...base, id: o.id, why: o.why, error: o.error, delayMs: o.delayMs });
    } else ev.emit('message:busy', { ...base, id: o.id });
  }
}

/** How long batching pauses after a batch deadlocked on its handlers' rows. */
const BATCH_PAUSE_MS = 30_000;

/** How many times one message's transaction runs when it keeps losing races (40P01, 40001). */
const RACE_RUNS = 3;

function isStop(o: Outcome): boolean {
  return o.status === 'retry' || o.status === 'busy' || o.status === 'not-run';
}

/**
 * A handler failure in a batch that is not that handler's own doing alone: a deadlock or
 * serialization failure among the handlers' rows (the same batch would meet it again), or a
 * statement refused because an earlier statement of the transaction failed (25P02: some handler
 * before let a query fail and carried on).
 */
function poisonsBatch(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return classifyDbError(error) === 'conflict-retry' || code === '25P02';
}

function vanished(): Error {
  return new Error('claim vanished: the row that made the claim wait was rolled back; run again');
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
