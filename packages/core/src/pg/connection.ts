import { type Logger, silentLogger } from '../logger.js';
import { rawPool } from './bounded-pool.js';
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

const guarded = new WeakSet<object>();

/**
 * A new client can report its backend's death in the very network read that completed its
 * connection (a FATAL right behind ReadyForQuery, as when backends are terminated in bulk during
 * a failover): node-postgres then emits `'error'` before our listener above is attached, and
 * with no listener the process exits. So every client the pool creates from now on gets a
 * listener that never goes away; the error still reaches us through the failed query and
 * through `Connection.error`. Installed once per pool, on pools that emit `'connect'` (pg.Pool), by
 * the constructors of the inbox and the relay, whose pools every Connection here comes from.
 */
export function guardNewClients(bounded: PgPoolLike, logger: Logger = silentLogger): void {
  const pool = rawPool(bounded);
  const emitter = pool as PgPoolLike & {
    on?(event: 'connect', listener: (client: { on?(e: 'error', l: () => void): unknown }) => void): unknown;
    on?(event: 'error', listener: (err: Error) => void): unknown;
    listenerCount?(event: 'error'): number;
  };
  if (guarded.has(pool) || typeof emitter.on !== 'function') return;
  guarded.add(pool);
  emitter.on('connect', (client) => {
    client.on?.('error', ignore);
  });
  // pg.Pool re-emits the error of an idle client (its backend was terminated, the server
  // restarted) on the pool; with no listener there the process exits (docs/pitfalls.md P1). The pool
  // replaces that client by itself, so a warning is all it needs. A listener of the user's own
  // is left to do the talking.
  if (typeof emitter.listenerCount === 'function' && emitter.listenerCount('error') === 0) {
    emitter.on('error', (err: Error) => {
      if (emitter.listenerCount?.('error') !== 1) return;
      logger.warn(
        {
          error: err.message,
          ...((err as { code?: unknown }).code === undefined
            ? {}
            : { code: (err as { code?: unknown }).code }),
        },
        'once: an idle PostgreSQL connection of the pool failed; the pool replaces it',
      );
    });
  }
}

function ignore(): void {}
