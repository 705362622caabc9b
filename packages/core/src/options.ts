import { boundPool, DEFAULT_POOL_BOUNDS, resolvePoolBounds } from './bounded-pool.js';
import { type CallerTransactions, isCallerTransactions } from './caller-transactions.js';
import type { Envelope, IdOf } from './envelope.js';
import { ErrorCode, OnceError } from './errors.js';
import type { Handler } from './handler.js';
import { quoteIdentifier } from './identifier.js';
import type { IsolationLevel } from './isolation.js';
import { type LeaseOptions, resolveLeaseOptions } from './lease/lease-options.js';
import { type Logger, type LoggerOption, resolveLoggers } from './logger.js';
import { checkNumber } from './option-check.js';
import type { Outbox } from './outbox.js';
import type { PgPoolLike } from './pg-like.js';

/** How a same-id, different-payload delivery is treated. */
export type ConflictPolicy = 'reject' | 'warn' | 'ignore';
/** How a batch isolates one failing handler from its neighbours. */
export type BatchMode = 'optimistic' | 'savepoint';
export type { IsolationLevel };
export { checkNumber };
/** `classify`'s verdict; `undefined` leaves the default (transient until `maxAttempts`). */
export type ErrorClass = 'transient' | 'permanent' | undefined;

/** Options of {@link createInbox}. The lease-mode fields (`mode`, `leaseMs`, ...) are documented in {@link LeaseOptions}. */
export interface InboxOptions<R = unknown> extends LeaseOptions {
  /** The pool the inbox and the handler's transaction use (`new pg.Pool(...)`). */
  pool: PgPoolLike;
  /** The name effects are recorded under: one per logical consumer (e.g. `billing.orders`). At most 200 bytes of UTF-8. */
  consumer: string;
  /** The message handler. */
  handler: Handler<R>;
  /** Schema holding once's tables. @default 'once' */
  schema?: string | undefined;
  /** Derive the id from the envelope (a business key). @default the envelope's id */
  idOf?: IdOf | undefined;
  /** The bytes whose SHA-256 is the payload fingerprint. @default the body */
  fingerprintOf?: ((envelope: Envelope) => Buffer | string) | undefined;
  /** Same id, different fingerprint. @default 'reject' (dead-letter it) */
  conflictPolicy?: ConflictPolicy | undefined;
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
  classify?: ((err: unknown) => ErrorClass) | undefined;
  /** Largest body stored with a `failed` row, in bytes; longer bodies are cut and flagged. @default 262144 */
  failedBodyMaxBytes?: number | undefined;
  /** @default 'optimistic' */
  batchMode?: BatchMode | undefined;
  /** @default 'read committed' */
  isolation?: IsolationLevel | undefined;
  /** Delay before redelivering a `busy` message, in ms. @default 1000 */
  busyDelayMs?: number | undefined;
  /**
   * Where once logs, `(fields, message)`: pino, bunyan or `console` as they are. Without one, only
   * the failure lines (dead letter, conflict, invalid id, exhausted attempts) are printed, one
   * `console.warn` line each; everything else is silent. `false` silences everything.
   * @default failure lines to console.warn
   */
  logger?: LoggerOption | undefined;
  /** Enables `ctx.publish` in handlers: messages go out through this outbox, in the handler's transaction. */
  outbox?: Outbox | undefined;
  /**
   * Claim inside a transaction that your data library opens and commits (Prisma, TypeORM, ...)
   * instead of one once opens on `pool`: see {@link CallerTransactions}, and the bindings
   * `@once/core/prisma` and `@once/core/typeorm`, which set it with the handler. Each message then
   * runs in its own transaction (`processBatch` included); `ctx.transaction` is the library's
   * transaction object and `ctx.tx` runs raw SQL in it. The library chooses the isolation level
   * (leave `isolation` unset). Cannot be combined with lease mode.
   * @default undefined (once opens the transaction on `pool`)
   */
  transactions?: CallerTransactions | undefined;
}

/** Every key of `T` present, read-only and never `undefined`: options once defaults are applied. */
export type Defined<T> = { readonly [K in keyof T]-?: Exclude<T[K], undefined> };

/** Options after defaults, frozen. */
export interface ResolvedInboxOptions<R = unknown>
  extends Defined<
    Omit<InboxOptions<R>, 'idOf' | 'fingerprintOf' | 'classify' | 'outbox' | 'logger' | 'transactions'>
  > {
  readonly transactions: CallerTransactions | undefined;
  /**
   * Keep an HTTP response with each processed id: set by `createHttpInbox` (`@once/core/adapter`)
   * for `@once/http`, false for every other inbox.
   */
  readonly httpResponses: boolean;
  /** Every log line goes here (silent without a `logger` option, or with `false`). */
  readonly logger: Logger;
  /** The failure lines go here: the given logger, console.warn without one, nothing with `false`. */
  readonly failureLogger: Logger;
  readonly outbox: Outbox | undefined;
  readonly idOf: IdOf | undefined;
  readonly fingerprintOf: ((envelope: Envelope) => Buffer | string) | undefined;
  readonly classify: ((err: unknown) => ErrorClass) | undefined;
  /** The schema, validated and quoted. */
  readonly quotedSchema: string;
}

const DAY_MS = 86_400_000;

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

function invalid(field: string, message: string): OnceError {
  return new OnceError(ErrorCode.InvalidOption, `options.${field} ${message}`);
}

function checkOneOf<T extends string>(field: string, value: unknown, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) {
    throw invalid(
      field,
      `must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, got ${JSON.stringify(value)}`,
    );
  }
  return value as T;
}

function checkFunction(field: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') throw invalid(field, 'must be a function');
}

/** Applies defaults and validates every field, naming the first bad one. */
export function resolveInboxOptions<R>(options: InboxOptions<R>): ResolvedInboxOptions<R> {
  if (typeof options !== 'object' || options === null) throw invalid('', 'must be an object');
  const o = { ...DEFAULT_INBOX_OPTIONS, ...stripUndefined(options) };
  const pool = o.pool as PgPoolLike | undefined;
  if (!pool || typeof pool.connect !== 'function' || typeof pool.query !== 'function') {
    throw invalid('pool', 'must be a pg Pool (an object with connect() and query())');
  }
  if (
    typeof o.consumer !== 'string' ||
    o.consumer.length === 0 ||
    Buffer.byteLength(o.consumer) > 200 ||
    o.consumer.includes('\0')
  ) {
    throw invalid(
      'consumer',
      `must be a non-empty string of at most 200 bytes of UTF-8, got ${JSON.stringify(o.consumer)}`,
    );
  }
  if (typeof o.handler !== 'function') throw invalid('handler', 'must be a function');
  checkFunction('idOf', o.idOf);
  checkFunction('fingerprintOf', o.fingerprintOf);
  checkFunction('classify', o.classify);
  checkFunction('retryDelayMs', o.retryDelayMs);
  const option = o.logger as LoggerOption | undefined;
  if (option !== undefined && option !== false) {
    for (const level of ['debug', 'info', 'warn', 'error'] as const) {
      if (typeof option?.[level] !== 'function') {
        throw invalid('logger', `must be false or have a ${level}() method`);
      }
    }
  }
  const { logger, failureLogger } = resolveLoggers(option);
  const bounds = resolvePoolBounds(o);
  const lease = resolveLeaseOptions(options);
  const transactions = o.transactions;
  if (transactions !== undefined) {
    if (!isCallerTransactions(transactions)) {
      throw invalid('transactions', 'must have run(body, options) and query(tx, text, values) methods');
    }
    if (lease.mode === 'lease') throw invalid('transactions', "cannot be combined with mode 'lease'");
    // 'read committed' is the default, which resolved options carry back in (createInbox({ ...inbox.options })).
    if (options.isolation !== undefined && options.isolation !== 'read committed') {
      throw invalid('isolation', "is the data library's to set when options.transactions is given");
    }
  }
  return Object.freeze({
    // Every statement and connect of once's own goes through the bounds (bounded-pool.ts).
    pool: boundPool(pool, bounds),
    consumer: o.consumer,
    handler: o.handler,
    schema: o.schema as string,
    quotedSchema: quoteIdentifier(o.schema, 'options.schema'),
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
    transactions,
    ...lease,
  });
}

function checkBoolean(field: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw invalid(field, `must be a boolean, got ${JSON.stringify(value)}`);
  return value;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function checkOutbox(value: unknown): Outbox | undefined {
  if (value === undefined) return undefined;
  if (typeof (value as Outbox).enqueue !== 'function' || typeof (value as Outbox).wake !== 'function') {
    throw invalid('outbox', 'must be an Outbox from createOutbox()');
  }
  return value as Outbox;
}
