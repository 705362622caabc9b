import { ErrorCode, OnceError } from '../errors.js';

/**
 * A publisher's connection, opened once and shared by every publish: the first `get()` opens it,
 * later ones wait on the same opening, and one that failed or was dropped (the broker closed it,
 * a request on it was abandoned) is forgotten so that the next `get()` opens afresh. After
 * `stop()` every `get()` is refused with `CLOSED`. What "open" and "close" mean is the adapter's.
 */
export class Connector<T> {
  readonly #open: (lost: () => void) => Promise<T>;
  readonly #closedMessage: string;
  #current: Promise<T> | undefined;
  #stopped = false;

  /**
   * `open` makes a connection; it may call `lost` whenever that connection later goes away (a
   * close event), which forgets it if it is still the current one. `closedMessage` is the
   * refusal's text once stopped.
   */
  constructor(open: (lost: () => void) => Promise<T>, closedMessage: string) {
    this.#open = open;
    this.#closedMessage = closedMessage;
  }

  /** True once `stop()` was called. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** The current connection, opened now if there is none. */
  get(): Promise<T> {
    if (this.#stopped) return Promise.reject(new OnceError(ErrorCode.Closed, this.#closedMessage));
    if (!this.#current) {
      const opening: Promise<T> = this.#open(() => this.drop(opening));
      this.#current = opening;
      opening.catch(() => this.drop(opening));
    }
    return this.#current;
  }

  /**
   * Forgets `opening` if it is still the current connection and says whether it was: only the
   * caller that gets `true` closes it, so a connection is given up once, however many notice.
   */
  drop(opening: Promise<T>): boolean {
    if (this.#current !== opening) return false;
    this.#current = undefined;
    return true;
  }

  /**
   * Refuses further `get()`s and hands back the connection made so far, for the adapter to close
   * (`undefined` when there was none, its opening failed, or `stop()` already ran).
   */
  async stop(): Promise<T | undefined> {
    if (this.#stopped) return undefined;
    this.#stopped = true;
    const current = this.#current;
    this.#current = undefined;
    return current?.catch(() => undefined);
  }
}
