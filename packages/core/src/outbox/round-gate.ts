/**
 * The rounds a relay over several databases may run at once (`concurrency`), one budget for all
 * of them. A round enters for its database and leaves when it has committed; while the budget is
 * spent, rounds wait, and each freed place goes to the next database in the order given that has
 * a round waiting (round-robin over databases, not first come first served over rounds), so while
 * one database waits no other database enters twice. A database with a backlog therefore delays
 * another database's waiting round by at most one of its rounds per place in the budget.
 */
export class RoundGate {
  readonly #limit: number;
  readonly #names: readonly string[];
  /** Per database, in the order of `names`, its waiting rounds, oldest first. */
  readonly #waiting: (() => void)[][];
  readonly #index = new Map<string, number>();
  /** Where the search for the next database to admit starts: just after the last one admitted. */
  #cursor = 0;
  #inUse = 0;

  /** A budget of `limit` rounds at once over the databases `names`, taken in turn in this order. */
  constructor(limit: number, names: readonly string[]) {
    this.#limit = limit;
    this.#names = names;
    this.#waiting = names.map(() => []);
    for (const [i, name] of names.entries()) this.#index.set(name, i);
  }

  /** Rounds inside now. */
  get inUse(): number {
    return this.#inUse;
  }

  /** The rounds of database `name` waiting now. */
  queued(name: string): number {
    return this.#waiting[this.#index.get(name) ?? -1]?.length ?? 0;
  }

  /**
   * Enters a round of database `name`: resolves with the function that leaves (idempotent) once
   * a place is free and it is this database's turn, or with `undefined` when `signal` aborts
   * first (the relay is stopping).
   */
  enter(name: string, signal?: AbortSignal): Promise<(() => void) | undefined> {
    const i = this.#index.get(name);
    if (i === undefined) throw new Error(`round gate: unknown database ${JSON.stringify(name)}`);
    if (signal?.aborted) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const admit = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(this.#leaver());
      };
      const onAbort = () => {
        const queue = this.#waiting[i]!;
        const at = queue.indexOf(admit);
        if (at >= 0) queue.splice(at, 1);
        resolve(undefined);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting[i]!.push(admit);
      this.#dispatch();
    });
  }

  #leaver(): () => void {
    this.#inUse++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.#inUse--;
      this.#dispatch();
    };
  }

  /** Fills free places, one database at a time in turn. */
  #dispatch(): void {
    const n = this.#names.length;
    while (this.#inUse < this.#limit) {
      let admitted = false;
      for (let k = 0; k < n; k++) {
        const i = (this.#cursor + k) % n;
        const next = this.#waiting[i]!.shift();
        if (next === undefined) continue;
        this.#cursor = (i + 1) % n;
        next();
        admitted = true;
        break;
      }
      if (!admitted) return;
    }
  }
}
