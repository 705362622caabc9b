import { ErrorCode, OnceError } from '../errors.js';
import type { Tx } from '../handler/handler.js';
import { queryOn } from '../handler/tx-handle.js';
import { Connection } from '../pg/connection.js';
import type { PgPoolLike, QueryConfigLike, QueryResultLike } from '../pg/pg-like.js';

/**
 * `ctx.tx` in lease mode: a transaction opened on first use, so a handler that only calls
 * external services holds no connection while it waits on them. When the handler used it, the
 * message's `done` is written in it and commits with the handler's writes. Revoked at settle,
 * like the transactional handle.
 */
export class LeaseTx implements Tx {
  readonly #pool: PgPoolLike;
  readonly #begin: string;
  #opening: Promise<Connection> | undefined;
  #conn: Connection | undefined;
  #revoked = false;

  constructor(pool: PgPoolLike, begin: string) {
    this.#pool = pool;
    this.#begin = begin;
  }

  /** The open transaction's connection, once the handler used `ctx.tx`. */
  get connection(): Connection | undefined {
    return this.#conn;
  }

  /** True while a connection is being opened (the handler settled with a query still starting). */
  get opening(): boolean {
    return this.#opening !== undefined && this.#conn === undefined;
  }

  // biome-ignore lint/suspicious/noExplicitAny: row type chosen by the caller, as in pg
  async query<R = any>(text: string | QueryConfigLike, values?: unknown[]): Promise<QueryResultLike<R>> {
    if (this.#revoked) throw revoked();
    const conn = await this.#open();
    if (this.#revoked) throw revoked();
    return queryOn<R>(conn.client, text, values);
  }

  /** Refuses every later query; the caller commits, rolls back or destroys {@link connection}. */
  revoke(): void {
    this.#revoked = true;
  }

  /** Waits for a connection still being opened, so it can be closed rather than leaked. */
  async settled(): Promise<Connection | undefined> {
    if (this.#opening) await this.#opening.catch(() => {});
    return this.#conn;
  }

  #open(): Promise<Connection> {
    this.#opening ??= (async () => {
      const conn = await Connection.open(this.#pool);
      try {
        await conn.client.query(this.#begin);
      } catch (err) {
        conn.destroy(err);
        throw err;
      }
      this.#conn = conn;
      return conn;
    })();
    return this.#opening;
  }
}

function revoked(): OnceError {
  return new OnceError(
    ErrorCode.TxRevoked,
    'ctx.tx was used after its message settled: await every query inside the handler (and stay within handlerTimeoutMs)',
  );
}
