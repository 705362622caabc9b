import { BatchPause } from './engine/batch-pause.js';
import { BatchTx } from './engine/batch-tx.js';
import { type EngineContext, engineContext } from './engine/context.js';
import { logFailureOutcome } from './engine/failure-lines.js';
import { FailureLog } from './engine/failure-log.js';
import { HttpTx } from './engine/http-tx.js';
import { inflightEnd, noteInflight } from './engine/inflight.js';
import { type Item, prepare } from './engine/item.js';
import { forgetStart, noteStart } from './engine/note-start.js';
import {
  callerTransactionsOf,
  type InboxOptions,
  leaseOf,
  type ResolvedInboxOptions,
  resolveInboxOptions,
} from './engine/options.js';
import { emitOutcome } from './engine/outcome-events.js';
import { OwnedTx } from './engine/owned-tx.js';
import { planRuns, type Run, runInOrder } from './engine/plan-runs.js';
import type { ProcessOptions } from './engine/process-options.js';
import { Readiness } from './engine/readiness.js';
import { recordFailed } from './engine/record-failure.js';
import { SingleTx } from './engine/single-tx.js';
import { settleStarts } from './engine/start-budget.js';
import { LeaseProcessor } from './lease/lease-processor.js';
import type { Envelope } from './message/envelope.js';
import { Events, ONCE_EVENT_NAMES, type OnceEventMap } from './message/events.js';
import type { Outcome } from './message/outcome.js';
import { namingFactory } from './option-check.js';
import { warnPoolSettings } from './pg/bounded-pool.js';
import { guardNewClients } from './pg/connection.js';

/**
 * Processes envelopes effectively once: the id's claim and the handler's writes commit or roll
 * back together. Adapters call {@link Inbox.process} or {@link Inbox.processBatch} and settle the
 * broker from the outcome. Create one with {@link createInbox}.
 *
 * A facade: planning, the transactions and the failure policy live in `engine/` (one decision
 * per module), lease mode in `lease/`.
 */
export class Inbox<R = unknown> {
  /** The options after defaults, frozen (their type is `ResolvedInboxOptions` of `@once/core/adapter`). */
  readonly options: ResolvedInboxOptions<R>;
  readonly #events: Events;
  readonly #readiness: Readiness;
  readonly #ctx: EngineContext<R>;
  readonly #pause: BatchPause;
  readonly #single: SingleTx<R>;
  /**
   * Set with `options.transactions`: every message runs alone in the caller's library's
   * transaction. Or, for an inbox made by `createHttpInbox`, in an HTTP key's transaction.
   */
  readonly #own: OwnedTx<R> | HttpTx<R> | undefined;
  readonly #batch: BatchTx<R>;
  /**
   * What runs one message (a run of kind `one`): lease mode's executor, the caller's or an HTTP
   * key's transaction, or the inbox's own single transaction.
   */
  readonly #one: { one(item: Item): Promise<Outcome<R>> };
  /** Lease mode: every message runs alone, under its lease. */
  readonly #lease: boolean;
  /** A failing handler's lines and the database's outages, rate-limited (engine/failure-log.ts). */
  readonly #failureLog: FailureLog;
  /** Who logs this inbox's failure lines: the inbox (`engine`) or the consumer that made it (`adapter`). */
  readonly failureLines: 'engine' | 'adapter';

  /**
   * `setup.failureLines`: who logs the failure lines (dead letters, conflicts, invalid ids,
   * exhausted attempts). `engine` (the default) for a bare inbox; a broker consumer that logs
   * them where it settles, with the destination, makes its inbox with `adapter`.
   */
  constructor(
    options: ResolvedInboxOptions<R>,
    setup: { failureLines?: 'engine' | 'adapter'; name?: string } = {},
  ) {
    this.options = options;
    this.failureLines = setup.failureLines ?? 'engine';
    this.#failureLog = new FailureLog({
      logger: options.failureLogger,
      consumer: options.consumer,
      prefix: setup.name ?? 'once',
    });
    guardNewClients(options.pool, options.logger);
    warnPoolSettings(options.pool, options.logger);
    this.#events = new Events(options.logger, { owner: 'Inbox', names: ONCE_EVENT_NAMES });
    this.#readiness = new Readiness(options);
    this.#ctx = engineContext(options, this.#events, this.#readiness.fault);
    this.#pause = new BatchPause(options.logger, options.consumer);
    this.#single = new SingleTx(this.#ctx);
    // Only the mode's own executor is built: the caller's transactions, an HTTP key's, a lease,
    // or the inbox's own transactions.
    const transactions = callerTransactionsOf(options);
    const lease = leaseOf(options);
    this.#own = transactions
      ? new OwnedTx(this.#ctx, transactions)
      : options.httpResponses && !lease
        ? new HttpTx(this.#ctx)
        : undefined;
    const one = (item: Item) => this.#single.one(item);
    this.#batch = new BatchTx(this.#ctx, one, this.#pause);
    this.#lease = lease !== undefined;
    this.#one = lease ? new LeaseProcessor(this.#ctx, lease) : (this.#own ?? this.#single);
  }

  /**
   * False while the inbox cannot process messages: the database is unreachable, or once's schema
   * is missing or too new. Messages then come back `not-run` (`unavailable`). True again once a
   * message reaches the database. Adapters fold it into their `health()`.
   */
  get available(): boolean {
    return this.#readiness.available;
  }

  /** The consumer name effects are recorded under. */
  get consumer(): string {
    return this.options.consumer;
  }

  /** Subscribe to an event; returns an unsubscribe function. */
  on<E extends keyof OnceEventMap>(name: E, listener: (event: OnceEventMap[E]) => void): () => void {
    return this.#events.on(name, listener);
  }

  /**
   * Checks that the schema is installed at the expected version, or at a newer one this build
   * still runs on (docs/upgrades.md). Throws SCHEMA_NOT_INSTALLED or SCHEMA_TOO_NEW (configuration
   * errors: nothing to retry), or the connection error.
   *
   * The first success is kept: the inbox awaits this before every message or batch, which must
   * not cost a round trip each. It is checked again only after a message met a setup fault (the
   * database unreachable, the schema gone). To ask the database now, whatever was seen before,
   * call `checkSchema(pool, schema)`, as the adapter kit's lifecycle does while a consumer holds.
   */
  ready(): Promise<void> {
    return this.#readiness.ready();
  }

  /**
   * Counts a start of this message and returns how many there have been, committed on its own.
   * The inbox counts the starts of suspects itself (`ProcessOptions.starts`); this is for callers
   * that keep a budget of their own. Throws InvalidIdError for an envelope without a usable id,
   * and database errors as they are.
   */
  noteStart(envelope: Envelope): Promise<number> {
    return noteStart(this.#ctx, envelope);
  }

  /**
   * Takes back one start counted by {@link Inbox.noteStart} whose run ended without spending an attempt
   * (a fault of the environment: a lost connection, a deadlock, a timeout), so that the count is
   * that of runs that were the message's own. Throws database errors as they are.
   */
  forgetStart(envelope: Envelope): Promise<void> {
    return forgetStart(this.#ctx, envelope);
  }

  /**
   * Notes, for an ordered consumer, that the offsets of `stream`'s `partition` up to `endOffset`
   * (inclusive, decimal text) are about to run: an upsert under this inbox's consumer name,
   * committed on its own and flushed before it resolves (schema version 11, the `inflight` table).
   * A consumer whose broker client cannot keep its replay marker in the committed offset's
   * metadata calls it before each range it runs; after a crash the next owner reads it back with
   * {@link Inbox.inflightEnd}. Throws INVALID_OPTION naming a bad argument, and database errors as
   * they are.
   */
  noteInflight(stream: string, partition: number, endOffset: string): Promise<void> {
    return noteInflight(this.#ctx, stream, partition, endOffset);
  }

  /**
   * The last offset {@link Inbox.noteInflight} noted for `stream`'s `partition` under this inbox's
   * consumer name (decimal text), or null when none was. An end below the partition's committed
   * offset means nothing was in flight. Throws INVALID_OPTION naming a bad argument, and database
   * errors as they are.
   */
  inflightEnd(stream: string, partition: number): Promise<string | null> {
    return inflightEnd(this.#ctx, stream, partition);
  }

  /**
   * Processes one envelope in its own transaction. Never throws for a message's sake: see
   * {@link Outcome}. `options`: this call's handler, the killer budget (see {@link ProcessOptions}).
   * The envelope is read, never written.
   */
  async process(envelope: Envelope, options?: ProcessOptions<R>): Promise<Outcome<R>> {
    const started = performance.now();
    const outcome = await this.#processOne(envelope, options);
    this.#emit(outcome, started);
    return outcome;
  }

  /**
   * Processes envelopes in order with one COMMIT for the fresh ones. Redelivered envelopes run one
   * per transaction (any may be the message that killed the last consumer). A `retry`, `busy` or
   * `not-run` outcome stops the batch: every later envelope is `not-run` (`behind`), so ordered
   * brokers can redeliver from there. Outcomes come back in input order. Never throws for a
   * message's sake, setup faults included. `options` as for {@link Inbox.process}, for every
   * envelope; suspects (`options.starts.suspect`) run one per transaction. The envelopes are
   * read, never written.
   */
  async processBatch(envelopes: readonly Envelope[], options?: ProcessOptions<R>): Promise<Outcome<R>[]> {
    const started = performance.now();
    const outcomes = await this.#processAll(envelopes, true, options);
    for (const o of outcomes) this.#emit(o, started);
    return outcomes;
  }

  /**
   * For an adapter that sends messages back without handing them to the inbox, because an
   * earlier one of their group or partition must be retried first: their `not-run` (`behind`)
   * outcomes, each with its `message:not-run` event, as {@link Inbox.processBatch} gives the
   * messages after a stop. Touches no database.
   */
  notRun(envelopes: readonly Envelope[]): Outcome<R>[] {
    const started = performance.now();
    return envelopes.map((envelope) => {
      const outcome = this.#ctx.out.notRun(envelope);
      this.#emit(outcome, started);
      return outcome;
    });
  }

  /**
   * {@link Inbox.process}'s path: what {@link Inbox.#processAll} does for one envelope, without
   * its arrays and runs when the envelope is an item.
   */
  async #processOne(envelope: Envelope, call: ProcessOptions<R> | undefined): Promise<Outcome<R>> {
    try {
      await this.#readiness.ready();
    } catch (err) {
      this.#readiness.fault(err);
      return this.#ctx.out.unavailable(envelope, undefined, err);
    }
    const prepared = prepare(envelope, this.options, call);
    const outcome =
      prepared.kind === 'item'
        ? await this.#one.one(prepared.item)
        : (await runInOrder(planRuns([prepared], false), this.#exec, this.#notRun))[0]!;
    if (call?.starts?.attemptIsStarts && outcome.status === 'retry' && prepared.kind !== 'invalid-id')
      await settleStarts(this.#ctx, prepared.item, outcome);
    return outcome;
  }

  async #processAll(
    envelopes: readonly Envelope[],
    wantBatch: boolean,
    call: ProcessOptions<R> | undefined,
  ): Promise<Outcome<R>[]> {
    const out = this.#ctx.out;
    try {
      await this.#readiness.ready();
    } catch (err) {
      // A setup fault (schema missing or too new, database unreachable) is never the messages':
      // none of them ran, none is spent or dead-lettered.
      this.#readiness.fault(err);
      return envelopes.map((e) => out.unavailable(e, undefined, err));
    }
    // After a batch deadlocked on the handlers' own rows, batches run one message per transaction
    // for a while (see engine/batch-pause.ts). The caller's transactions and lease mode run every
    // message alone.
    // Suspects whose starts are counted run alone too.
    const batched = wantBatch && this.#pause.open && !this.#own && !this.#lease && !call?.starts?.suspect;
    const prepared = envelopes.map((e) => prepare(e, this.options, call));
    const outcomes = await runInOrder(planRuns(prepared, batched), this.#exec, this.#notRun);
    if (call?.starts?.attemptIsStarts) {
      // Outcomes come back in input order, one per message.
      const settles: Promise<void>[] = [];
      for (let i = 0; i < outcomes.length; i++) {
        const p = prepared[i]!;
        if (outcomes[i]!.status === 'retry' && p.kind !== 'invalid-id')
          settles.push(settleStarts(this.#ctx, p.item, outcomes[i]!));
      }
      if (settles.length > 0) await Promise.all(settles);
    }
    return outcomes;
  }

  readonly #notRun = (envelope: Envelope, id: string | undefined): Outcome<R> =>
    this.#ctx.out.notRun(envelope, id);

  readonly #exec = (run: Run): Promise<Outcome<R>[]> | Outcome<R>[] => {
    switch (run.kind) {
      case 'one':
        return this.#one.one(run.item).then((o) => [o]);
      case 'batch':
        return this.#batch.run(run.items);
      case 'invalid-id':
        return [this.#ctx.out.failed(run.envelope, undefined, 'invalid-id', run.error)];
      case 'unplaceable':
        return recordFailed(this.#ctx, run.item, 'permanent', run.error).then((o) => [o]);
    }
  };

  #emit(o: Outcome<R>, started: number): void {
    this.#readiness.note(o);
    emitOutcome(this.#events, this.options.consumer, o, started);
    this.#failureLog.note(o, this.options.maxAttempts, this.failureLines === 'engine');
    // Only a conflict or a failure has a line (see failure-lines.ts).
    if ((o.status === 'conflict' || o.status === 'failed') && this.failureLines === 'engine')
      logFailureOutcome(this.options.failureLogger, this.options.consumer, o, this.options.recordFailed);
  }
}

/** Creates an {@link Inbox}; validates the options and names the first bad field. */
export function createInbox<R = unknown>(options: InboxOptions<R>): Inbox<R> {
  return new Inbox(namingFactory('createInbox', () => resolveInboxOptions(options)));
}
