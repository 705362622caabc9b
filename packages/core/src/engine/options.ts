import { hostname } from 'node:os';
import type { Handler } from '../handler/handler.js';
import { type Logger, resolveLoggers } from '../logger.js';
import type { Envelope } from '../message/envelope.js';
import {
  checkBoolean,
  checkDurationMs,
  checkFunction,
  checkName,
  checkNumber,
  checkOneOf,
  invalidOption,
} from '../option-check.js';
import type { Outbox } from '../outbox/outbox.js';
import { boundPool, DEFAULT_POOL_BOUNDS, resolvePoolBounds } from '../pg/bounded-pool.js';
import { type CallerTransactions, isCallerTransactions } from '../pg/caller-transactions.js';
import type { PgPoolLike } from '../pg/pg-like.js';
import { quoteIdentifier } from '../sql/identifier.js';
import type { IsolationLevel } from '../sql/isolation.js';
import { type HOLD, type ResolvedRouting, resolveRouting } from './routing.js';

/** How a same-id, different-payload delivery is treated. */
export type ConflictPolicy = NonNullable<InboxOptions['conflictPolicy']>;
/** How a batch isolates one failing handler from its neighbours. */
export type BatchMode = NonNullable<InboxOptions['batchMode']>;
export type { IsolationLevel };
/** `classify`'s verdict; `undefined` leaves the default (transient until `maxAttempts`). */
export type ErrorClass = ReturnType<NonNullable<InboxOptions['classify']>>;

/**
 * How the inbox claims a message and where the handler's effects go: one choice per consumer
 * name (rows written in one mode are not understood by another).
 *
 * - `'transaction'` (the default): the handler's effects are writes in the message's PostgreSQL
 *   transaction, which once opens on `pool` and which holds the claim.
 * - `'lease'`, or `{ lease: { leaseMs, heartbeatMs, workerId } }` to set the lease: the handler
 *   calls things outside PostgreSQL; the id is held by a lease and each external effect is a
 *   durable step (`ctx.step`). Every message runs alone. See {@link LeaseSettings}.
 * - `{ transactions }`: claim inside a transaction that your data library opens and commits
 *   (Prisma, TypeORM, ...): see {@link CallerTransactions}, and the bindings `@once/core/prisma`
 *   and `@once/core/typeorm`, which set it with the handler. Each message then runs in its own
 *   transaction (`processBatch` included); `ctx.transaction` is the library's transaction object
 *   and `ctx.tx` runs raw SQL in it. The library chooses the isolation level (leave `isolation`
 *   unset).
 */
export type InboxMode =
  | 'transaction'
  | 'lease'
  | {
      /** Lease mode with its settings; every setting has a default. */
      lease: LeaseSettings;
      /** Not allowed here: lease mode runs in once's own transactions, not the caller's. */
      transactions?: never;
    }
  | {
      /** Run each message in the caller's ORM transactions, through this binding. */
      transactions: CallerTransactions;
      /** Not allowed here: caller transactions cannot be combined with lease mode. */
      lease?: never;
    };

/** The settings of lease mode (`mode: { lease: { ... } }`); each has a default. */
export interface LeaseSettings {
  /**
   * How long a claim holds the id without renewal, in ms. A worker that stops renewing (crashed,
   * stalled, cut off) loses the id this long after its last renewal; then another delivery takes
   * it over. Also what adapters keep the broker's delivery alive for. At least 10.
   * @default 30000
   */
  leaseMs?: number | undefined;
  /** Interval of lease renewal while a handler runs, in ms. At most half of `leaseMs`. @default leaseMs / 3 */
  heartbeatMs?: number | undefined;
  /**
   * Names this worker in the `owner` column, for operators (each claim adds a random suffix, so
   * two claims never share an owner). At most 100 characters.
   * @default `${hostname}:${pid}`
   */
  workerId?: string | undefined;
}

/** Options of {@link createInbox}. */
export interface InboxOptions<R = unknown> {
  /**
   * The pool the inbox and the handler's transaction use (`new pg.Pool(...)`). Give `pool`, or
   * `databases` and `route` for messages spread over several databases.
   */
  pool?: PgPoolLike | undefined;
  /**
   * Several databases, name → pool (names of 1 to 63 characters of `[A-Za-z0-9_.-]`), instead of
   * one `pool`: a database per tenant, or shards. Each message is claimed, handled, recorded and
   * settled in the one database `route` names; a batch runs per database, and a database that
   * cannot be used holds only its own messages. Every database needs once's schema (`migrateDatabases`).
   * The first one named is the home database, which keeps the consumer's replay markers.
   */
  databases?: Readonly<Record<string, PgPoolLike>> | undefined;
  /**
   * With `databases`: the name of the database an envelope belongs in. It must send one message
   * id, and one ordering key (Kafka's key, SQS's message group), to one database: a second answer
   * for either within this process is refused. A message it cannot place (it throws, or names no
   * database of the set) ends `failed` with reason `unroutable`: dead-lettered, not recorded.
   * `HOLD` keeps a message waiting (`not-run`, `held`, its attempt unspent), as while its tenant
   * moves to another database.
   */
  route?: ((envelope: Envelope) => string | typeof HOLD) | undefined;
  /** The name effects are recorded under: one per logical consumer (e.g. `billing.orders`). At most 200 bytes of UTF-8. */
  consumer: string;
  /** The message handler. */
  handler: Handler<R>;
  /** Schema holding once's tables. @default 'once' */
  schema?: string | undefined;
  /** Derive the id from the envelope (a business key). @default the envelope's id */
  idOf?: ((envelope: Envelope) => string | undefined) | undefined;
  /** The bytes whose SHA-256 is the payload fingerprint. @default the body */
  fingerprintOf?: ((envelope: Envelope) => Buffer | string) | undefined;
  /** Same id, different fingerprint. @default 'reject' (dead-letter it) */
  conflictPolicy?: 'reject' | 'warn' | 'ignore' | undefined;
  /** Store the handler's JSON result and return it to duplicates. @default false */
  storeResult?: boolean | undefined;
  /**
   * `false`: never write a `failed` row. Where the inbox would record a message failed (a
   * permanent error, `maxAttempts` reached, a lease-mode step mistake, a throwing
   * `fingerprintOf`), it gives the claim back instead (rolled back; in lease mode released, its
   * recorded steps kept) and still answers `failed`, so the adapter dead-letters it as before; a
   * later delivery of the id runs the handler again, from its recorded steps in lease mode. In
   * lease mode the count of claims then no longer ends a message that keeps crashing its process:
   * the broker's own redelivery limit must. `@once/http` sets it: a request is never recorded
   * failed, its client's retry runs again.
   * @default true
   */
  recordFailed?: boolean | undefined;
  /** Attempts before a transient failure becomes `failed`. @default 5 */
  maxAttempts?: number | undefined;
  /** How long a claim waits for another worker holding the same id before `busy`, in ms. @default 5000 */
  lockTimeoutMs?: number | undefined;
  /**
   * The longest once waits for the reply to one of its own statements (the claim, COMMIT, a start
   * count, the schema check, a failure record, lease-mode statements), in ms. Past it the
   * statement fails with `StatementTimeoutError` (code `STATEMENT_TIMEOUT`), its connection is
   * destroyed (never returned to the pool) and the message is given back, its attempt not
   * counted; a COMMIT that timed out is settled by the claim on redelivery. Holds whatever the
   * pool's settings. The handler's own statements are bounded by `handlerTimeoutMs` instead.
   * @default 30000
   */
  statementTimeoutMs?: number | undefined;
  /**
   * The longest once waits for a connection from the pool, in ms; past it `ConnectTimeoutError`
   * (code `CONNECT_TIMEOUT`) and the message is given back unrun. @default 10000
   */
  connectTimeoutMs?: number | undefined;
  /** The handler's deadline in ms; past it the transaction is abandoned and the outcome is `retry`. @default 60000 */
  handlerTimeoutMs?: number | undefined;
  /** How long processed ids are remembered, in ms. Keep it longer than the broker can redeliver. @default 7 days */
  retentionMs?: number | undefined;
  /** Redelivery delay for attempt n (1-based) in ms. @default min(1000 · 2^(n-1), 60000) */
  retryDelayMs?: ((attempt: number) => number) | undefined;
  /** Sort an error into transient or permanent. PermanentError is always permanent. */
  classify?: ((err: unknown) => 'transient' | 'permanent' | undefined) | undefined;
  /** Largest body stored with a `failed` row, in bytes; longer bodies are cut and flagged. @default 262144 */
  failedBodyMaxBytes?: number | undefined;
  /**
   * How a batch isolates one failing handler from its neighbours: `optimistic` runs the batch
   * again without the failed message, `savepoint` takes a savepoint per message.
   * @default 'optimistic'
   */
  batchMode?: 'optimistic' | 'savepoint' | undefined;
  /** The isolation level of once's transactions (not with `mode: { transactions }`). @default 'read committed' */
  isolation?: 'read committed' | 'repeatable read' | 'serializable' | undefined;
  /** Delay before redelivering a `busy` message, in ms. @default 1000 */
  busyDelayMs?: number | undefined;
  /**
   * Where once logs, `(fields, message)`: pino, bunyan or `console` as they are. Without one, only
   * the failure lines (dead letter, conflict, invalid id, exhausted attempts) are printed, one
   * `console.warn` line each; everything else is silent. `false` silences everything.
   * @default failure lines to console.warn
   */
  logger?: Logger | false | undefined;
  /** Enables `ctx.publish` in handlers: messages go out through this outbox, in the handler's transaction. */
  outbox?: Outbox | undefined;
  /** How messages are claimed: see {@link InboxMode}. @default 'transaction' */
  mode?: InboxMode | undefined;
}

/** Every key of `T` present, read-only and never `undefined`: options once defaults are applied. */
export type Defined<T> = { readonly [K in keyof T]-?: Exclude<T[K], undefined> };

/** The lease settings after defaults. */
export type ResolvedLease = Defined<LeaseSettings>;

/** {@link InboxMode} after defaults: a value `createInbox` takes again. */
export type ResolvedMode =
  | 'transaction'
  | { readonly lease: ResolvedLease; readonly transactions?: never }
  | { readonly transactions: CallerTransactions; readonly lease?: never };

/** The inbox's options after defaults, frozen, as `Inbox.options` holds them: what adapters read (the consumer name, the loggers, the retry delays, the mode). */
export interface ResolvedInboxOptions<R = unknown>
  extends Defined<
    Omit<
      InboxOptions<R>,
      'idOf' | 'fingerprintOf' | 'classify' | 'outbox' | 'logger' | 'mode' | 'pool' | 'databases' | 'route'
    >
  > {
  /** The pool, bounded; with `databases`, the home database's (the first named). */
  readonly pool: PgPoolLike;
  /** With `databases` and `route`: every database, bounded, and the router; undefined with one `pool`. */
  readonly routing: ResolvedRouting | undefined;
  /** The claim mode; read it with {@link leaseOf} and {@link callerTransactionsOf}. */
  readonly mode: ResolvedMode;
  /**
   * Keep an HTTP response with each processed id: set by `createHttpInbox` (`@once/core/adapter`)
   * for `@once/http`, false for every other inbox.
   */
  readonly httpResponses: boolean;
  /** Every log line goes here (silent without a `logger` option, or with `false`). */
  readonly logger: Logger;
  /** The failure lines go here: the given logger, console.warn without one, nothing with `false`. */
  readonly failureLogger: Logger;
  /** The outbox of `ctx.publish`, if any. */
  readonly outbox: Outbox | undefined;
  /** `idOf` as given. */
  readonly idOf: InboxOptions['idOf'];
  /** `fingerprintOf` as given. */
  readonly fingerprintOf: ((envelope: Envelope) => Buffer | string) | undefined;
  /** `classify` as given. */
  readonly classify: ((err: unknown) => ErrorClass) | undefined;
  /** The schema, validated and quoted. */
  readonly quotedSchema: string;
}

/** Lease mode's settings, or undefined when the inbox is not in lease mode. */
export function leaseOf(options: { readonly mode: ResolvedMode }): ResolvedLease | undefined {
  return typeof options.mode === 'object' ? options.mode.lease : undefined;
}

/** The caller's transactions (`mode: { transactions }`), or undefined. */
export function callerTransactionsOf(options: {
  readonly mode: ResolvedMode;
}): CallerTransactions | undefined {
  return typeof options.mode === 'object' ? options.mode.transactions : undefined;
}

const DAY_MS = 86_400_000;

/** Defaults of the inbox's options. */
export const DEFAULT_INBOX_OPTIONS = Object.freeze({
  schema: 'once',
  conflictPolicy: 'reject' as ConflictPolicy,
  storeResult: false,
  recordFailed: true,
  maxAttempts: 5,
  lockTimeoutMs: 5_000,
  handlerTimeoutMs: 60_000,
  statementTimeoutMs: DEFAULT_POOL_BOUNDS.statementTimeoutMs,
  connectTimeoutMs: DEFAULT_POOL_BOUNDS.connectTimeoutMs,
  retentionMs: 7 * DAY_MS,
  retryDelayMs: (attempt: number) => Math.min(1000 * 2 ** Math.max(0, attempt - 1), 60_000),
  failedBodyMaxBytes: 262_144,
  batchMode: 'optimistic' as BatchMode,
  isolation: 'read committed' as IsolationLevel,
  busyDelayMs: 1_000,
});

/** Lease mode's default lease, in ms. */
export const DEFAULT_LEASE_MS = 30_000;
/** Smallest lease, in ms: below it a renewal's own round trip is a sizeable part of the lease. */
export const MIN_LEASE_MS = 10;

/**
 * Spellings of earlier releases, refused with the new one named: the mode is one option now, so
 * that a lease and the caller's transactions cannot both be asked for.
 */
export const MOVED_INBOX_OPTIONS: Readonly<Record<string, string>> = Object.freeze({
  leaseMs: 'mode: { lease: { leaseMs } }',
  heartbeatMs: 'mode: { lease: { heartbeatMs } }',
  workerId: 'mode: { lease: { workerId } }',
  transactions: 'mode: { transactions }',
});

/** Applies defaults and validates every field, naming the first bad one. */
export function resolveInboxOptions<R>(options: InboxOptions<R>): ResolvedInboxOptions<R> {
  if (typeof options !== 'object' || options === null) throw invalidOption('', 'must be an object');
  for (const [old, now] of Object.entries(MOVED_INBOX_OPTIONS)) {
    if ((options as unknown as Record<string, unknown>)[old] !== undefined) {
      throw invalidOption(old, `is no longer an option of its own: write ${now}`);
    }
  }
  const o = { ...DEFAULT_INBOX_OPTIONS, ...stripUndefined(options) };
  // Resolved options passed back in (`createInbox({ ...inbox.options })`) carry their routing.
  const carried = (options as { routing?: ResolvedRouting }).routing;
  const routing = carried !== undefined && o.databases === undefined ? carried : resolveRouting(o);
  const pool = routing
    ? (routing.pools.values().next().value as PgPoolLike)
    : (o.pool as PgPoolLike | undefined);
  if (!pool || typeof pool.connect !== 'function' || typeof pool.query !== 'function') {
    throw invalidOption('pool', 'must be a pg Pool (an object with connect() and query())');
  }
  if (
    typeof o.consumer !== 'string' ||
    o.consumer.length === 0 ||
    Buffer.byteLength(o.consumer) > 200 ||
    o.consumer.includes('\0')
  ) {
    throw invalidOption(
      'consumer',
      `must be a non-empty string of at most 200 bytes of UTF-8, got ${JSON.stringify(o.consumer)}`,
    );
  }
  checkFunction('handler', o.handler);
  for (const field of ['idOf', 'fingerprintOf', 'classify', 'retryDelayMs'] as const) {
    if (o[field] !== undefined) checkFunction(field, o[field]);
  }
  const option = o.logger as Logger | false | undefined;
  if (option !== undefined && option !== false) {
    for (const level of ['debug', 'info', 'warn', 'error'] as const) {
      if (typeof option?.[level] !== 'function') {
        throw invalidOption('logger', `must be false or have a ${level}() method`);
      }
    }
  }
  const { logger, failureLogger } = resolveLoggers(option);
  const bounds = resolvePoolBounds(o);
  const mode = resolveMode(options.mode);
  if (typeof mode === 'object' && mode.transactions) {
    // 'read committed' is the default, which resolved options carry back in (createInbox({ ...inbox.options })).
    if (options.isolation !== undefined && options.isolation !== 'read committed') {
      throw invalidOption('isolation', "is the data library's to set with mode: { transactions }");
    }
  }
  if (routing && typeof mode === 'object' && mode.transactions) {
    throw invalidOption(
      'databases',
      "cannot be combined with mode: { transactions }, whose library transactions run in one database: use once's own transactions or lease mode",
    );
  }
  return Object.freeze({
    // Every statement and connect of once's own goes through the bounds (bounded-pool.ts).
    pool: boundPool(pool, bounds),
    routing: routing
      ? Object.freeze({
          pools: new Map([...routing.pools].map(([name, p]) => [name, boundPool(p, bounds)] as const)),
          route: routing.route,
        })
      : undefined,
    consumer: o.consumer,
    handler: o.handler as Handler<R>,
    schema: o.schema as string,
    quotedSchema: quoteIdentifier(o.schema, "option 'schema'"),
    idOf: o.idOf,
    fingerprintOf: o.fingerprintOf,
    conflictPolicy: checkOneOf('conflictPolicy', o.conflictPolicy, ['reject', 'warn', 'ignore']),
    storeResult: checkBoolean('storeResult', o.storeResult),
    recordFailed: checkBoolean('recordFailed', o.recordFailed),
    httpResponses: false,
    maxAttempts: checkNumber('maxAttempts', o.maxAttempts, 1),
    lockTimeoutMs: checkNumber('lockTimeoutMs', o.lockTimeoutMs, 1),
    handlerTimeoutMs: checkNumber('handlerTimeoutMs', o.handlerTimeoutMs, 1),
    statementTimeoutMs: bounds.statementTimeoutMs,
    connectTimeoutMs: bounds.connectTimeoutMs,
    retentionMs: checkNumber('retentionMs', o.retentionMs, 1000),
    retryDelayMs: o.retryDelayMs as (attempt: number) => number,
    classify: o.classify,
    failedBodyMaxBytes: checkNumber('failedBodyMaxBytes', o.failedBodyMaxBytes, 0),
    batchMode: checkOneOf('batchMode', o.batchMode, ['optimistic', 'savepoint']),
    isolation: checkOneOf('isolation', o.isolation, ['read committed', 'repeatable read', 'serializable']),
    busyDelayMs: checkNumber('busyDelayMs', o.busyDelayMs, 0),
    logger,
    failureLogger,
    outbox: checkOutbox(o.outbox),
    mode,
  });
}

/**
 * The options of one database of an inbox over several (`databases`): these options on that
 * database's bounded `pool`, routing none, and an outbox waking that database's relays. What a
 * routed inbox runs each database with, and what an adapter that runs a database's messages
 * itself (`@once/http`) builds its transactions from.
 */
export function databaseOptions<R>(
  options: ResolvedInboxOptions<R>,
  pool: PgPoolLike,
): ResolvedInboxOptions<R> {
  return Object.freeze({ ...options, pool, routing: undefined, outbox: options.outbox?.forPool(pool) });
}

/** Validates the mode and fills lease mode's defaults, naming the bad field. */
export function resolveMode(mode: unknown): ResolvedMode {
  if (mode === undefined || mode === 'transaction') return 'transaction';
  if (mode === 'lease') return Object.freeze({ lease: resolveLease({}) });
  if (typeof mode !== 'object' || mode === null) {
    throw invalidOption(
      'mode',
      `must be 'transaction', 'lease', { lease: { ... } } or { transactions }, got ${JSON.stringify(mode)}`,
    );
  }
  const { lease, transactions } = mode as { lease?: unknown; transactions?: unknown };
  if ((lease === undefined) === (transactions === undefined)) {
    throw invalidOption('mode', 'must have exactly one of lease and transactions');
  }
  if (transactions !== undefined) {
    if (!isCallerTransactions(transactions)) {
      throw invalidOption(
        'mode.transactions',
        'must have run(body, options) and query(tx, text, values) methods',
      );
    }
    return Object.freeze({ transactions });
  }
  if (typeof lease !== 'object' || lease === null) {
    throw invalidOption('mode.lease', `must be an object of lease settings, got ${JSON.stringify(lease)}`);
  }
  return Object.freeze({ lease: resolveLease(lease as LeaseSettings) });
}

function resolveLease(settings: LeaseSettings): ResolvedLease {
  const leaseMs = checkDurationMs('mode.lease.leaseMs', settings.leaseMs ?? DEFAULT_LEASE_MS, MIN_LEASE_MS);
  const heartbeatMs = checkDurationMs(
    'mode.lease.heartbeatMs',
    settings.heartbeatMs ?? Math.floor(leaseMs / 3),
    1,
  );
  if (heartbeatMs * 2 > leaseMs) {
    throw invalidOption(
      'mode.lease.heartbeatMs',
      `(${heartbeatMs} ms) must be at most half of leaseMs (${leaseMs} ms), so that one late renewal does not lose the lease`,
    );
  }
  const workerId = checkName('mode.lease.workerId', settings.workerId ?? `${hostname()}:${process.pid}`, 100);
  return Object.freeze({ leaseMs, heartbeatMs, workerId });
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function checkOutbox(value: unknown): Outbox | undefined {
  if (value === undefined) return undefined;
  if (typeof (value as Outbox).enqueue !== 'function' || typeof (value as Outbox).wake !== 'function') {
    throw invalidOption('outbox', 'must be an Outbox from createOutbox()');
  }
  return value as Outbox;
}
