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
  databaseOptions,
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
import { HOLD, Router, type UnroutableError } from './engine/routing.js';
import { SingleTx } from './engine/single-tx.js';
import { settleStarts } from './engine/start-budget.js';
import { ErrorCode, OnceError } from './errors.js';
import { LeaseProcessor } from './lease/lease-processor.js';
import { type Envelope, resolveId } from './message/envelope.js';
import { Events, ONCE_EVENT_NAMES, type OnceEventMap } from './message/events.js';
import type { Outcome } from './message/outcome.js';
import { namingFactory } from './option-check.js';
import { boundPool, warnPoolSettings } from './pg/bounded-pool.js';
import { guardNewClients } from './pg/connection.js';
import type { PgPoolLike } from './pg/pg-like.js';
import { checkSchema } from './schema/check-schema.js';
import { checkDatabases } from './schema/databases.js';

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
  /** The name of this inbox's database, when it is one of a routed inbox's (its events carry it). */
  readonly #database: string | undefined;
  /**
   * With `databases`: the router, and one inbox per database that runs what is routed there
   * (its own claims, batches, readiness and failure records). This inbox places envelopes and
   * answers for the ones it cannot place; the replay markers stay in the home database's.
   */
  readonly #routed: { readonly router: Router; inboxes: ReadonlyMap<string, Inbox<R>> } | undefined;
  /** With `databases`: the options each database's inbox starts from (its `idOf` reads {@link Inbox.#placedIds}). */
  readonly #perDatabase: ResolvedInboxOptions<R>;
  /** With `databases` and `idOf`: the id the router resolved for an envelope it placed, read back by its database's inbox. */
  readonly #placedIds = new WeakMap<Envelope, string>();
  /** A routed inbox's listeners (`on`), attached to every database's inbox, those added later too. */
  readonly #subscriptions = new Set<Subscription>();
  /** What made this inbox: a routed inbox makes the inbox of a database added later the same way. */
  readonly #setup: { failureLines?: 'engine' | 'adapter'; name?: string; database?: string };

  /**
   * `setup.failureLines`: who logs the failure lines (dead letters, conflicts, invalid ids,
   * exhausted attempts). `engine` (the default) for a bare inbox; a broker consumer that logs
   * them where it settles, with the destination, makes its inbox with `adapter`.
   * `setup.database`: set by a routed inbox on the inbox of each of its databases.
   */
  constructor(
    options: ResolvedInboxOptions<R>,
    setup: { failureLines?: 'engine' | 'adapter'; name?: string; database?: string } = {},
  ) {
    this.options = options;
    this.#setup = setup;
    this.failureLines = setup.failureLines ?? 'engine';
    this.#database = setup.database;
    this.#failureLog = new FailureLog({
      logger: options.failureLogger,
      consumer: options.consumer,
      prefix: setup.name ?? 'once',
    });
    const routing = options.routing;
    if (routing) {
      const inboxes = new Map<string, Inbox<R>>();
      const idOf = options.idOf;
      // The router resolves each id (to check it stays in one database); the database's inbox
      // takes it from there rather than calling the user's `idOf` a second time.
      this.#perDatabase = idOf
        ? Object.freeze({ ...options, idOf: (e: Envelope) => this.#placedIds.get(e) ?? idOf(e) })
        : options;
      for (const [name, pool] of routing.pools) inboxes.set(name, this.#inboxOf(name, pool));
      this.#routed = { router: new Router(routing, options.idOf), inboxes };
    } else {
      this.#perDatabase = options;
      this.#routed = undefined;
      guardNewClients(options.pool, options.logger);
      warnPoolSettings(options.pool, options.logger);
    }
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
    if (this.#routed) return [...this.#routed.inboxes.values()].every((inbox) => inbox.available);
    return this.#readiness.available;
  }

  /**
   * The names of the databases this inbox serves, in the order given: `databases`' names, or
   * none for an inbox over one `pool`.
   */
  get databases(): string[] {
    return this.#routed ? this.#routed.router.names : [];
  }

  /**
   * With `databases`: the names of the databases whose last message found them unusable
   * (unreachable, schema missing or too new). Empty otherwise.
   */
  get unavailableDatabases(): string[] {
    if (!this.#routed) return [];
    return [...this.#routed.inboxes].filter(([, inbox]) => !inbox.available).map(([name]) => name);
  }

  /**
   * With `databases`: adds a database while the inbox (or its consumer) runs; `route` may name
   * it from the next message on. Migrate it first (`migrate`); add it in every process that
   * routes before `route` answers its name, or a process without it dead-letters its messages
   * as `unroutable`. Throws INVALID_OPTION for an inbox over one `pool`, a name already in use or
   * not a database name, or a value that is not a pool. Its pool gets this inbox's statement and
   * connect bounds.
   */
  addDatabase(name: string, pool: PgPoolLike): void {
    if (!this.#routed) {
      throw new OnceError(ErrorCode.InvalidOption, 'addDatabase: this inbox has one pool, not databases');
    }
    const [checked, raw] = checkDatabases({ [name]: pool })[0]!;
    if (this.#routed.inboxes.has(checked)) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        `addDatabase: database '${checked}' is already one of this inbox's`,
      );
    }
    const bounded = boundPool(raw, {
      statementTimeoutMs: this.options.statementTimeoutMs,
      connectTimeoutMs: this.options.connectTimeoutMs,
    });
    const inbox = this.#inboxOf(checked, bounded);
    for (const sub of this.#subscriptions) sub.offs.push(sub.attach(inbox));
    // A new map rather than a write into the old one: batches in flight keep the set they began with.
    this.#routed.inboxes = new Map([...this.#routed.inboxes, [checked, inbox]]);
    this.#routed.router.add(checked);
  }

  /** The inbox of one database of a routed inbox: these options on its pool, its outbox waking that database. */
  #inboxOf(name: string, pool: PgPoolLike): Inbox<R> {
    return new Inbox<R>(databaseOptions(this.#perDatabase, pool), { ...this.#setup, database: name });
  }

  /**
   * With `databases`: forgets which database the ids and ordering keys routed to `database` (or
   * to any) went to, so that `route` may send them elsewhere without `unroutable`. A step of
   * moving a tenant (docs/operations.md): hold it, copy its data and inbox rows, switch the
   * router, call this in every process that routes, release the tenant.
   */
  forgetRoutes(database?: string): void {
    this.#routed?.router.forget(database);
  }

  /**
   * {@link Inbox.ready} that resolves as soon as one database is ready, with `databases`; rejects
   * with the first database's error when none is. The same as `ready()` over one `pool`.
   */
  readyAny(): Promise<void> {
    if (!this.#routed) return this.ready();
    return Promise.any([...this.#routed.inboxes.values()].map((i) => i.ready())).catch((err: unknown) => {
      throw err instanceof AggregateError && err.errors.length > 0 ? err.errors[0] : err;
    });
  }

  /**
   * Checks once's schema in the database now, whatever was seen before; with `databases`, in
   * every database (`all`, throws the first failure) or until one passes (`any`). The adapter kit's lifecycle calls it while a consumer holds.
   */
  async checkNow(which: 'all' | 'any' = 'all'): Promise<void> {
    if (!this.#routed) return checkSchema(this.options.pool, this.options.schema);
    const checks = [...this.#routed.inboxes.values()].map((inbox) => inbox.checkNow());
    if (which === 'all') {
      await Promise.all(checks);
      return;
    }
    await Promise.any(checks).catch((err: unknown) => {
      throw err instanceof AggregateError && err.errors.length > 0 ? err.errors[0] : err;
    });
  }

  /** The consumer name effects are recorded under. */
  get consumer(): string {
    return this.options.consumer;
  }

  /** Subscribe to an event; returns an unsubscribe function. */
  on<E extends keyof OnceEventMap>(name: E, listener: (event: OnceEventMap[E]) => void): () => void {
    if (!this.#routed) return this.#events.on(name, listener);
    // Kept, so that a database added later (addDatabase) is listened to as well.
    const sub: Subscription = {
      attach: (inbox) => inbox.on(name, listener),
      offs: [this.#events.on(name, listener)],
    };
    for (const inbox of this.#routed.inboxes.values()) sub.offs.push(sub.attach(inbox));
    this.#subscriptions.add(sub);
    return () => {
      this.#subscriptions.delete(sub);
      for (const off of sub.offs.splice(0)) off();
    };
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
    if (this.#routed)
      return Promise.all([...this.#routed.inboxes.values()].map((i) => i.ready())).then(() => {});
    return this.#readiness.ready();
  }

  /**
   * Counts a start of this message and returns how many there have been, committed on its own.
   * The inbox counts the starts of suspects itself (`ProcessOptions.starts`); this is for callers
   * that keep a budget of their own. Throws InvalidIdError for an envelope without a usable id,
   * and database errors as they are.
   */
  noteStart(envelope: Envelope): Promise<number> {
    if (this.#routed) return this.#routedTo(envelope).then((inbox) => inbox.noteStart(envelope));
    return noteStart(this.#ctx, envelope);
  }

  /**
   * Takes back one start counted by {@link Inbox.noteStart} whose run ended without spending an attempt
   * (a fault of the environment: a lost connection, a deadlock, a timeout), so that the count is
   * that of runs that were the message's own. Throws database errors as they are.
   */
  forgetStart(envelope: Envelope): Promise<void> {
    if (this.#routed) return this.#routedTo(envelope).then((inbox) => inbox.forgetStart(envelope));
    return forgetStart(this.#ctx, envelope);
  }

  /** The inbox of the database `envelope` is routed to; rejects with its UnroutableError. */
  async #routedTo(envelope: Envelope): Promise<Inbox<R>> {
    const placed = this.#routed!.router.place(envelope);
    if ('error' in placed) throw placed.error;
    if ('hold' in placed) throw new OnceError(ErrorCode.Unroutable, 'route() holds this message (HOLD)');
    return this.#inboxFor(envelope, placed);
  }

  /** The inbox of the database `envelope` was placed in; notes the id the router resolved for it. */
  #inboxFor(envelope: Envelope, placed: { database: string; id: string | undefined }): Inbox<R> {
    if (placed.id !== undefined && this.options.idOf) this.#placedIds.set(envelope, placed.id);
    return this.#routed!.inboxes.get(placed.database)!;
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
    if (this.#routed) {
      const placed = this.#routed.router.place(envelope);
      if ('database' in placed) return this.#inboxFor(envelope, placed).process(envelope, options);
      const outcome =
        'hold' in placed
          ? this.#ctx.out.held(envelope, this.#idOrUndefined(envelope))
          : this.#unroutable(envelope, placed.error);
      this.#emit(outcome, started);
      return outcome;
    }
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
    if (this.#routed) return this.#processRouted(envelopes, options, started);
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
      return this.#ctx.out.unavailable(envelope, this.#idOrUndefined(envelope), err);
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
      return envelopes.map((e) => out.unavailable(e, this.#idOrUndefined(e), err));
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

  /**
   * A batch over several databases: each database's envelopes, in their order, form one batch of
   * that database's inbox, and the databases run side by side. A stop in one database (a retry,
   * `busy`, the database unusable) makes only its own later envelopes `not-run`; the others run.
   * Outcomes come back in input order.
   */
  async #processRouted(
    envelopes: readonly Envelope[],
    call: ProcessOptions<R> | undefined,
    started: number,
  ): Promise<Outcome<R>[]> {
    const { router, inboxes } = this.#routed!;
    const outcomes = new Array<Outcome<R>>(envelopes.length);
    const groups = new Map<string, { at: number[]; envelopes: Envelope[] }>();
    envelopes.forEach((envelope, i) => {
      const placed = router.place(envelope);
      if (!('database' in placed)) {
        outcomes[i] =
          'hold' in placed
            ? this.#ctx.out.held(envelope, this.#idOrUndefined(envelope))
            : this.#unroutable(envelope, placed.error);
        this.#emit(outcomes[i]!, started);
        return;
      }
      if (placed.id !== undefined && this.options.idOf) this.#placedIds.set(envelope, placed.id);
      let group = groups.get(placed.database);
      if (!group) {
        group = { at: [], envelopes: [] };
        groups.set(placed.database, group);
      }
      group.at.push(i);
      group.envelopes.push(envelope);
    });
    await Promise.all(
      [...groups].map(async ([name, group]) => {
        const inbox = inboxes.get(name)!;
        const got =
          group.envelopes.length === 1
            ? [await inbox.process(group.envelopes[0]!, call)]
            : await inbox.processBatch(group.envelopes, call);
        got.forEach((o, j) => {
          outcomes[group.at[j]!] = o;
        });
      }),
    );
    return outcomes;
  }

  /** The `failed` (`unroutable`) outcome of an envelope the router could not place: not recorded. */
  #unroutable(envelope: Envelope, error: UnroutableError): Outcome<R> {
    return this.#ctx.out.failed(envelope, this.#idOrUndefined(envelope), 'unroutable', error);
  }

  /** The envelope's id after `idOf`, or undefined when it has no usable one. */
  #idOrUndefined(envelope: Envelope): string | undefined {
    try {
      return resolveId(envelope, this.options.idOf);
    } catch {
      return undefined;
    }
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
    emitOutcome(this.#events, this.options.consumer, o, started, this.#database);
    this.#failureLog.note(o, this.options.maxAttempts, this.failureLines === 'engine');
    // Only a conflict or a failure has a line (see failure-lines.ts).
    if ((o.status === 'conflict' || o.status === 'failed') && this.failureLines === 'engine')
      logFailureOutcome(this.options.failureLogger, this.options.consumer, o, this.options.recordFailed);
  }
}

/** One listener of a routed inbox: how to attach it to a database's inbox, and how to detach it everywhere. */
interface Subscription {
  readonly attach: (inbox: Pick<Inbox<unknown>, 'on'>) => () => void;
  readonly offs: (() => void)[];
}

/** Creates an {@link Inbox}; validates the options and names the first bad field. */
export function createInbox<R = unknown>(options: InboxOptions<R>): Inbox<R> {
  return new Inbox(namingFactory('createInbox', () => resolveInboxOptions(options)));
}
