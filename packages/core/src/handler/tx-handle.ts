import { ErrorCode, OnceError } from '../errors.js';
import { rawClient } from '../pg/bounded-pool.js';
import type { PgClientLike, QueryConfigLike, QueryResultLike } from '../pg/pg-like.js';
import type { Tx } from './handler.js';

/**
 * The handler's transaction. Revoked the moment its message settles, so a query issued late
 * (an un-awaited promise, a handler that outlived its deadline) is refused here instead of
 * running in autocommit or inside the next message's transaction on the same connection.
 */
export class TxHandle implements Tx {
  #client: PgClientLike | undefined;
  /** The run whose `ctx.signal` belongs with this handle (transactional runs), if any. */
  readonly #signals: { signal(): AbortSignal } | undefined;

  constructor(client: PgClientLike, signals?: { signal(): AbortSignal }) {
    // The handler's statements are bounded by its deadline (handlerTimeoutMs), not by once's
    // statement bound: a handler may run a statement longer than statementTimeoutMs.
    this.#client = rawClient(client);
    this.#signals = signals;
  }

  /** The signal of the run `tx` belongs to, if it was made with one. */
  static signalOf(tx: TxHandle): AbortSignal | undefined {
    return tx.#signals?.signal();
  }

  // biome-ignore lint/suspicious/noExplicitAny: row type chosen by the caller, as in pg
  query<R = any>(text: string | QueryConfigLike, values?: unknown[]): Promise<QueryResultLike<R>> {
    const client = this.#client;
    if (!client) {
      return Promise.reject(
        new OnceError(
          ErrorCode.TxRevoked,
          'ctx.tx was used after its message settled: await every query inside the handler (and stay within handlerTimeoutMs)',
        ),
      );
    }
    return queryOn<R>(client, text, values);
  }

  revoke(): void {
    this.#client = undefined;
  }
}

/**
 * A handler's query on `client`: SQL text with its values, or a query-config object, which goes
 * to the client as it is (every pg 8 client takes one).
 */
export function queryOn<R>(
  client: PgClientLike,
  config: string | QueryConfigLike,
  values: unknown[] | undefined,
): Promise<QueryResultLike<R>> {
  if (typeof config === 'string') {
    return values === undefined ? client.query<R>(config) : client.query<R>(config, values);
  }
  if (typeof config !== 'object' || config === null || typeof config.text !== 'string') {
    return Promise.reject(
      new OnceError(
        ErrorCode.InvalidOption,
        'ctx.tx.query: pass SQL text, or a query config with a string `text`',
      ),
    );
  }
  const pgClient = client as unknown as {
    query<T>(config: QueryConfigLike, values?: unknown[]): Promise<QueryResultLike<T>>;
  };
  return values === undefined ? pgClient.query<R>(config) : pgClient.query<R>(config, values);
}
