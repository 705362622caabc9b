/**
 * Runs tasks one after another per key (a message group, a routing key, a partition) and in parallel across keys. A
 * task with several keys (a batch spanning groups) waits for each key's previous task. Tails are
 * taken in call order, so two tasks never wait on each other.
 */
export class KeyedSerializer {
  readonly #tails = new Map<string, Promise<void>>();

  /** Keys with a task queued or running. */
  get size(): number {
    return this.#tails.size;
  }

  /** Runs `task` after every earlier task of any of `keys` has settled; tasks of other keys run meanwhile. */
  async run<T>(keys: readonly string[], task: () => Promise<T>): Promise<T> {
    const before = keys.map((k) => this.#tails.get(k)).filter((p): p is Promise<void> => p !== undefined);
    let done!: () => void;
    const tail = new Promise<void>((resolve) => {
      done = resolve;
    });
    for (const k of keys) this.#tails.set(k, tail);
    try {
      await Promise.all(before);
      return await task();
    } finally {
      done();
      for (const k of keys) if (this.#tails.get(k) === tail) this.#tails.delete(k);
    }
  }
}
