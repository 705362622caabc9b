/**
 * A readers-writer gate: any number of shared holders at once, or one exclusive holder alone.
 * An exclusive request waits for the shared holders to finish and keeps new ones out meanwhile
 * (writer preference), so it cannot be starved by a steady stream of fresh messages.
 *
 * The consumer runs fresh messages shared and redelivered ones exclusive: when a redelivered
 * message kills the process, nothing else was running, so its start count is the only one that
 * rose for that death.
 */
export class Gate {
  #shared = 0;
  #exclusive = false;
  #writersWaiting = 0;
  readonly #waiters: (() => void)[] = [];

  /** Waits until no exclusive holder runs or waits; call the returned function once to leave. */
  async shared(): Promise<() => void> {
    while (this.#exclusive || this.#writersWaiting > 0) await this.#wait();
    this.#shared++;
    return this.#once(() => {
      this.#shared--;
      this.#wake();
    });
  }

  /** Waits until it is the only holder; call the returned function once to leave. */
  async exclusive(): Promise<() => void> {
    this.#writersWaiting++;
    try {
      while (this.#exclusive || this.#shared > 0) await this.#wait();
    } finally {
      this.#writersWaiting--;
    }
    this.#exclusive = true;
    return this.#once(() => {
      this.#exclusive = false;
      this.#wake();
    });
  }

  #wait(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Every waiter re-checks its condition; the losers wait again. */
  #wake(): void {
    for (const resolve of this.#waiters.splice(0)) resolve();
  }

  #once(fn: () => void): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      fn();
    };
  }
}
