/**
 * A client-side bound on every statement once sends and on every connection it takes. Owns one
 * decision: what happens when PostgreSQL does not answer in time.
 *
 * node-postgres waits for a reply without end when the path to the server goes dark after the
 * server's TCP stack acknowledged the query (and about 15 minutes, `tcp_retries2`, when it had
 * not); its `query_timeout` only errors the callback, leaving the connection busy and, when it is
 * returned, back in the pool. Here a statement that outlives `statementTimeoutMs` fails with
 * {@link StatementTimeoutError} and its socket is destroyed at once: the connection never serves
 * another statement, and whoever holds it releases it into destruction. A `connect()` that
 * outlives `connectTimeoutMs` fails with {@link ConnectTimeoutError}; the client, if it arrives
 * later, goes back to the pool unused.
 *
 * Applied at one seam: where once receives a pool (the inbox's options, the relay's, `purge`,
 * `migrate`, `checkSchema`), so it holds with a default `new pg.Pool()`. A handler's own
 * statements (`ctx.tx`) are not bounded here: the handler's deadline (`handlerTimeoutMs`) is
 * theirs.
 */

import { ErrorCode, OnceError } from '../errors.js';
import type { Logger } from '../logger.js';
import { checkNumber } from '../option-check.js';
import type { PgClientLike, PgPoolLike, QueryConfigLike, QueryResultLike } from './pg-like.js';

/** The two bounds, in ms. */
export interface PoolBounds {
  /** The longest once waits for the reply to one of its statements. @default 30000 */
  readonly statementTimeoutMs: number;
  /** The longest once waits for a connection from the pool (a new one included). @default 10000 */
  readonly connectTimeoutMs: number;
}

/** The defaults docs/guarantees.md states ("What stalls, and until when"). */
export const DEFAULT_POOL_BOUNDS: PoolBounds = Object.freeze({
  statementTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
});

/** Bounds from options, defaults filled in and each checked. */
export function resolvePoolBounds(o: {
  statementTimeoutMs?: number | undefined;
  connectTimeoutMs?: number | undefined;
}): PoolBounds {
  return Object.freeze({
    statementTimeoutMs: checkNumber(
      'statementTimeoutMs',
      o.statementTimeoutMs ?? DEFAULT_POOL_BOUNDS.statementTimeoutMs,
      1,
    ),
    connectTimeoutMs: checkNumber(
      'connectTimeoutMs',
      o.connectTimeoutMs ?? DEFAULT_POOL_BOUNDS.connectTimeoutMs,
      1,
    ),
  });
}

/**
 * One of once's statements got no reply within `statementTimeoutMs`. Its connection was
 * destroyed; whether the statement took effect is unknown (for a COMMIT, the claim decides on
 * redelivery). A fault of the environment: it never counts toward a message's attempts.
 */
export class StatementTimeoutError extends OnceError {
  /** The statement's first keyword (`COMMIT`, `BEGIN`, `SELECT`, `LISTEN`, ...). */
  readonly statement: string;
  /** The bound that passed, in ms. */
  readonly boundMs: number;

  constructor(statement: string, boundMs: number) {
    super(
      ErrorCode.StatementTimeout,
      `once: ${statement} got no reply from PostgreSQL within ${boundMs} ms (statementTimeoutMs); its connection was destroyed`,
      { retryable: true },
    );
    this.name = 'StatementTimeoutError';
    this.statement = statement;
    this.boundMs = boundMs;
  }
}

/** No connection came from the pool within `connectTimeoutMs`. Nothing was sent. */
export class ConnectTimeoutError extends OnceError {
  /** The bound that passed, in ms. */
  readonly boundMs: number;

  constructor(boundMs: number) {
    super(
      ErrorCode.ConnectTimeout,
      `once: no PostgreSQL connection within ${boundMs} ms (connectTimeoutMs)`,
      { retryable: true },
    );
    this.name = 'ConnectTimeoutError';
    this.boundMs = boundMs;
  }
}

const RAW = Symbol('once.boundedPool.raw');

/** A pool whose statements and connects are bounded; `raw` is the pool it wraps. */
export interface BoundedPool extends PgPoolLike {
  readonly bounds: PoolBounds;
  readonly [RAW]: PgPoolLike;
}

/** True for a pool {@link boundPool} made. */
export function isBounded(pool: PgPoolLike): pool is BoundedPool {
  return (pool as Partial<BoundedPool>)[RAW] !== undefined;
}

/** The user's own pool behind a bounded one (or the pool itself). */
export function rawPool(pool: PgPoolLike): PgPoolLike {
  return (pool as Partial<BoundedPool>)[RAW] ?? pool;
}

/** The client behind a bounded one (or the client itself), for the handler's unbounded `ctx.tx`. */
export function rawClient(client: PgClientLike): PgClientLike {
  return client instanceof BoundedClient ? client.raw : client;
}

/**
 * `pool` with `bounds` applied. A pool already bounded is bound again from its own raw pool, so
 * options passed on (`createInbox({ ...inbox.options })`) never stack two bounds.
 */
export function boundPool(pool: PgPoolLike, bounds: PoolBounds = DEFAULT_POOL_BOUNDS): BoundedPool {
  const existing = pool as Partial<BoundedPool>;
  if (existing[RAW] !== undefined) {
    if (
      existing.bounds?.statementTimeoutMs === bounds.statementTimeoutMs &&
      existing.bounds.connectTimeoutMs === bounds.connectTimeoutMs
    ) {
      return pool as BoundedPool;
    }
    return new Bounded(existing[RAW], bounds);
  }
  return new Bounded(pool, bounds);
}

class Bounded implements BoundedPool {
  readonly [RAW]: PgPoolLike;
  readonly bounds: PoolBounds;

  constructor(raw: PgPoolLike, bounds: PoolBounds) {
    this[RAW] = raw;
    this.bounds = bounds;
  }

  connect(): Promise<PgClientLike> {
    const raw = this[RAW];
    const ms = this.bounds.connectTimeoutMs;
    const statementMs = this.bounds.statementTimeoutMs;
    return new Promise((resolve, reject) => {
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        reject(new ConnectTimeoutError(ms));
      }, ms);
      raw.connect().then(
        (client) => {
          if (late) {
            // Nobody waits for it any more: back to the pool, unused.
            client.release();
            return;
          }
          clearTimeout(timer);
          resolve(new BoundedClient(client, statementMs));
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  // biome-ignore lint/suspicious/noExplicitAny: mirrors pg's own signature so pg.Pool fits
  async query<R = any>(text: string, values?: unknown[]): Promise<QueryResultLike<R>> {
    // pg.Pool's own query(), but on a bounded client: connect, query, release (with the error,
    // as pg.Pool does, so a connection that failed a statement is not reused).
    const raw = this[RAW];
    if (typeof raw.connect !== 'function')
      return bounded(raw.query<R>(text, values), text, this.bounds.statementTimeoutMs);
    const client = await this.connect();
    let result: QueryResultLike<R>;
    try {
      result = await client.query<R>(text, values);
    } catch (err) {
      client.release(err instanceof Error ? err : true);
      throw err;
    }
    client.release();
    return result;
  }
}

/**
 * A statement of a pool-like object without `connect()` (no connection to destroy): the bound
 * still ends the wait.
 */
function bounded<T>(sent: Promise<T>, text: string, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      sent.catch(ignore);
      reject(new StatementTimeoutError(statementKind(text), ms));
    }, ms);
    sent.then(
      (r) => {
        clearTimeout(timer);
        resolve(r);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/** What pg's client keeps of its socket: enough to destroy it, or to set its keepalive. */
interface SocketHolder {
  connection?: { stream?: { destroy?(): void; setKeepAlive?(enable: boolean, delayMs: number): unknown } };
  end?(): unknown;
}

/** The idle time before the first keepalive probe on the connections once holds idle (LISTEN). */
export const KEEPALIVE_IDLE_MS = 10_000;

/**
 * Turns TCP keepalive on for a checked-out pg client's socket (pg sets none unless the pool has
 * `keepAlive: true`). For a connection once holds idle, where no statement's bound applies: the
 * relay's LISTEN session. False when the client has no socket to set it on.
 */
export function keepAlive(client: PgClientLike, idleMs = KEEPALIVE_IDLE_MS): boolean {
  const stream = (rawClient(client) as unknown as SocketHolder).connection?.stream;
  if (typeof stream?.setKeepAlive !== 'function') return false;
  stream.setKeepAlive(true, idleMs);
  return true;
}

/**
 * A checked-out client whose statements are bounded. After a statement timed out it is dead:
 * its socket is gone, every later statement fails at once, and its release destroys it.
 */
export class BoundedClient implements PgClientLike {
  readonly raw: PgClientLike;
  readonly #ms: number;
  #dead: StatementTimeoutError | undefined;

  constructor(raw: PgClientLike, ms: number) {
    this.raw = raw;
    this.#ms = ms;
  }

  // biome-ignore lint/suspicious/noExplicitAny: mirrors pg's own signature so pg.PoolClient fits
  query<R = any>(text: string | QueryConfigLike, values?: unknown[]): Promise<QueryResultLike<R>> {
    if (this.#dead) return Promise.reject(this.#dead);
    const raw = this.raw as unknown as {
      query<T>(t: string | QueryConfigLike, v?: unknown[]): Promise<QueryResultLike<T>>;
    };
    const sent = values === undefined ? raw.query<R>(text) : raw.query<R>(text, values);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        // The reply may still come, or the destroyed socket's error: nobody listens any more.
        sent.catch(ignore);
        reject(this.#kill(text));
      }, this.#ms);
      sent.then(
        (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        (e: unknown) => {
          clearTimeout(timer);
          reject(e);
        },
      );
    });
  }

  release(err?: Error | boolean): void {
    this.raw.release(this.#dead ?? err);
  }

  on(event: 'error', listener: (err: Error) => void): unknown {
    return this.raw.on?.(event, listener);
  }

  off(event: 'error', listener: (err: Error) => void): unknown {
    return this.raw.off?.(event, listener);
  }

  #kill(text: string | QueryConfigLike): StatementTimeoutError {
    const err = new StatementTimeoutError(statementKind(text), this.#ms);
    this.#dead = err;
    // The socket's own error event, which destroying it raises, must not find pg without a listener.
    this.raw.on?.('error', ignore);
    const holder = this.raw as unknown as SocketHolder;
    const stream = holder.connection?.stream;
    if (typeof stream?.destroy === 'function') stream.destroy();
    else
      try {
        void Promise.resolve(holder.end?.()).catch(ignore);
      } catch {
        // Not a pg client: its release(err) below must do.
      }
    return err;
  }
}

/** The statement's first keyword, for the error: never its parameters, never the whole text. */
export function statementKind(text: string | QueryConfigLike): string {
  const sql = typeof text === 'string' ? text : (text?.text ?? '');
  const m = /^\s*(?:--[^\n]*\n\s*|\/\*[\s\S]*?\*\/\s*)*([A-Za-z]+)/.exec(sql);
  return m ? m[1]!.toUpperCase() : 'statement';
}

/**
 * One warning per pool whose own settings leave a dark network path undetected: pg.Pool's
 * `keepAlive` (an idle or waiting socket notices a dead peer) and `connectionTimeoutMillis` (a
 * new connection that never completes does not hold a pool slot for good).
 */
const warned = new WeakSet<object>();

export function warnPoolSettings(pool: PgPoolLike, logger: Logger): void {
  const raw = rawPool(pool) as PgPoolLike & { options?: Record<string, unknown> };
  const options = raw.options;
  if (warned.has(raw) || typeof options !== 'object' || options === null) return;
  warned.add(raw);
  const missing: string[] = [];
  if (options.keepAlive !== true) missing.push('keepAlive: true');
  if (!(typeof options.connectionTimeoutMillis === 'number' && options.connectionTimeoutMillis > 0))
    missing.push('connectionTimeoutMillis');
  if (missing.length === 0) return;
  logger.warn(
    { missing },
    `once: the PostgreSQL pool has no ${missing.join(' and no ')}: a network path that goes dark is noticed late (docs/operations.md, "Pool settings")`,
  );
}

function ignore(): void {}
