/**
 * The process-wide isolation gate: a readers-writer lock with writer preference. A consumer runs
 * fresh deliveries shared and suspect ones (redelivered after a crash: any of them may be the
 * message that killed the process) exclusive, across everything it consumes. When such a message
 * kills the process, nothing else was running, so its start count (`Inbox.noteStart`) is the only
 * one that rose for that death. Writer preference keeps fresh traffic from starving the suspects.
 */
export class Gate {
  #shared = 0;
  #exclusive = false;
  #writersWaiting = 0;
  readonly #waiters: (() => void)[] = [];

  /** Waits until no exclusive holder runs or waits; call the returned function once to leave. */
  async shared(): Promise<() => void> {
    for (;;) {
      const leave = this.tryShared();
      if (leave) return leave;
      await this.#wait();
    }
  }

  /**
   * {@link Gate.shared} without waiting: enters and returns the function that leaves when no exclusive
   * holder runs or waits, else returns undefined (enters nothing). Lets a caller skip a promise
   * and its turn of the microtask queue when the gate is open, which it nearly always is.
   */
  tryShared(): (() => void) | undefined {
    if (this.#exclusive || this.#writersWaiting > 0) return undefined;
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

// One gate for the whole process, whatever consumers (and copies of @once/core) it runs: a
// message that kills the process kills them all, so a suspect must run with nothing beside it
// anywhere in the process.
const PROCESS_GATE = Symbol.for('@once/core.processGate');

/** The process-wide isolation gate every consumer shares. */
export function processGate(): Gate {
  const g = globalThis as { [PROCESS_GATE]?: Gate };
  g[PROCESS_GATE] ??= new Gate();
  return g[PROCESS_GATE];
}
