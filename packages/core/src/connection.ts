import type { PgClientLike, PgPoolLike } from './pg-like.js';

/**
 * A checked-out client with an `'error'` listener for as long as we hold it: node-postgres
 * emits `'error'` on a client whose backend dies, and with no listener the process exits.
 * `release()` returns it to the pool; `destroy()` closes it, for connections in doubt.
 */
export class Connection {
  readonly client: PgClientLike;
  #error: Error | undefined;
  #done = false;
  readonly #onError = (err: Error): void => {
    this.#error = err;
  };

  private constructor(client: PgClientLike) {
    this.client = client;
    client.on?.('error', this.#onError);
  }

  static async open(pool: PgPoolLike): Promise<Connection> {
    return new Connection(await pool.connect());
  }

  /** The error the connection reported while we held it, if any. */
  get error(): Error | undefined {
    return this.#error;
  }

  release(): void {
    this.#finish(this.#error);
  }

  destroy(err?: unknown): void {
    this.#finish(err instanceof Error ? err : (this.#error ?? new Error('connection discarded')));
  }

  #finish(err: Error | undefined): void {
    if (this.#done) return;
    this.#done = true;
    this.client.off?.('error', this.#onError);
    // Keep a listener: the socket may still report an error after we let go.
    if (err) this.client.on?.('error', () => {});
    this.client.release(err ?? undefined);
  }
}
