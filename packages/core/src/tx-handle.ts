import { ErrorCode, OnceError } from './errors.js';
import type { Tx } from './handler.js';
import type { PgClientLike, QueryResultLike } from './pg-like.js';

/**
 * The handler's transaction. Revoked the moment its message settles, so a query issued late
 * (an un-awaited promise, a handler that outlived its deadline) is refused here instead of
 * running in autocommit or inside the next message's transaction on the same connection.
 */
export class TxHandle implements Tx {
  #client: PgClientLike | undefined;

  constructor(client: PgClientLike) {
    this.#client = client;
  }

  // biome-ignore lint/suspicious/noExplicitAny: row type chosen by the caller, as in pg
  query<R = any>(text: string, values?: unknown[]): Promise<QueryResultLike<R>> {
    const client = this.#client;
    if (!client) {
      return Promise.reject(
        new OnceError(
          ErrorCode.TxRevoked,
          'ctx.tx was used after its message settled: await every query inside the handler (and stay within handlerTimeoutMs)',
        ),
      );
    }
    return values === undefined ? client.query<R>(text) : client.query<R>(text, values);
  }

  revoke(): void {
    this.#client = undefined;
  }
}
