import type { Envelope } from '../message/envelope.js';
import type { PublishOptions } from '../outbox/outbox.js';
import type { QueryConfigLike, QueryResultLike } from '../pg/pg-like.js';

/**
 * The handler's view of its transaction. Queries run inside the transaction that also holds
 * the message's claim. The handle is revoked when the message settles: a late query (an
 * un-awaited promise, a handler past its deadline) throws instead of running elsewhere.
 */
export interface Tx {
  /** Runs one statement with `$1`-style parameters in the message's transaction. */
  // biome-ignore lint/suspicious/noExplicitAny: row type chosen by the caller, as in pg
  query<R = any>(text: string, values?: unknown[]): Promise<QueryResultLike<R>>;
  /** pg's query-config form (`{ text, values, name, rowMode, types }`), for drivers that pass one. */
  // biome-ignore lint/suspicious/noExplicitAny: row type chosen by the caller, as in pg
  query<R = any>(config: QueryConfigLike, values?: unknown[]): Promise<QueryResultLike<R>>;
}

/** What a handler receives beside the envelope. */
export interface HandlerContext {
  /** The message's transaction. Use it for every write that must happen once. */
  tx: Tx;
  /**
   * With the inbox's `transactions` option (a transaction your data library opens): that
   * library's transaction object, the one the claim is in. The bindings hand it to your handler as
   * `tx`, typed. Otherwise undefined.
   */
  transaction?: unknown;
  /** The message id (after `idOf`). */
  id: string;
  /** The consumer name this inbox records under. */
  consumer: string;
  /** 1 on a first delivery. In lease mode, the count of claims of this id (takeovers included). */
  attempt: number;
  /** Aborted when the handler's deadline passes; pass it to fetch() and friends. */
  signal: AbortSignal;
  /**
   * Writes a message into the outbox in this transaction: it is published if and only if the
   * message's effects commit. Needs `options.outbox`. Returns the outgoing message id.
   */
  publish(destination: string, body: Buffer | string | object, options?: PublishOptions): Promise<string>;
  /**
   * Lease mode (`mode: 'lease'`): runs one effect outside Postgres (a charge, a mail, a partner
   * call) as a durable step. `fn` runs only if no earlier attempt recorded step `name` for this
   * message; its JSON result is recorded before `step` returns, and later attempts get the
   * recorded result without calling `fn`. Await each step before the next; use a name once per
   * run. In transactional mode it throws STEP_NEEDS_LEASE (the effect could not be recorded once).
   * See docs/lease-mode.md for what is and is not guaranteed.
   */
  step<T>(name: string, fn: StepFn<T>): Promise<T>;
  /**
   * A stable key for step `name` of this message and consumer (a UUID): the same on every
   * attempt and worker. Pass it to APIs that accept idempotency keys. Works in both modes.
   */
  idempotencyKey(step: string): string;
}

/** A message handler. Its return value is stored and handed to duplicates when `storeResult` is on. */
export type Handler<R = unknown> = (envelope: Envelope, ctx: HandlerContext) => Promise<R> | R;

/**
 * A step's work: one external effect. It receives the step's stable key (`idempotencyKey`,
 * as `ctx.idempotencyKey(name)` gives it: pass it to APIs that accept one) and a `signal`,
 * aborted when the handler's deadline passes or the lease is lost. Its result must be
 * JSON-serialisable.
 */
export type StepFn<T> = (info: {
  /** The step's stable key, the same on every attempt of the message: pass it to APIs that take one. */
  readonly idempotencyKey: string;
  /** Aborted when the handler's deadline passes or the lease is lost: stop the effect then. */
  readonly signal: AbortSignal;
}) => Promise<T> | T;
