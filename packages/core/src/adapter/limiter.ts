/**
 * A counting semaphore: at most `size` holders at once, served in arrival order. Bounds the
 * handlers (and so the pool connections) running at once across everything a consumer reads.
 */
export class Limiter {
  readonly #size: number;
  #active = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(size: number) {
    this.#size = size;
  }

  /** Holders right now. */
  get active(): number {
    return this.#active;
  }

  /** Waits for a slot; call the returned function exactly once to give it back. */
  async acquire(): Promise<() => void> {
    if (this.#active < this.#size) this.#active++;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiting.shift();
      if (next)
        next(); // the slot passes straight to the next waiter
      else this.#active--;
    };
  }
}
