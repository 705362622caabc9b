/** What the fetch loop's window depends on. */
export interface PullWindowOptions {
  readonly batch: boolean;
  readonly batchSize: number;
  readonly concurrency: number;
}

/**
 * How many messages the consumer may hold (fetched and not yet settled), and how much of that
 * must be free before it pulls again.
 *
 * - Without `batch`: `batchSize × concurrency` held, a pull once half of it is free (many
 *   one-message pulls cost more than they save).
 * - With `batch`: one batch more than can run at once, `batchSize × (concurrency + 1)`, and a
 *   pull as soon as a whole batch fits. The next batch is fetched while the current ones run,
 *   so the pull's round trip is not added to every batch; at most one batch waits, kept alive
 *   with `working()` like every held message.
 */
export function pullWindow(o: PullWindowOptions): { capacity: number; least: number } {
  if (o.batch) return { capacity: o.batchSize * (o.concurrency + 1), least: o.batchSize };
  const capacity = o.batchSize * o.concurrency;
  return { capacity, least: Math.max(1, Math.floor(capacity / 2)) };
}

/** Messages to pull now with `held` messages held: 0 while less than the window's `least` is free. */
export function pullSize(o: PullWindowOptions, held: number): number {
  const { capacity, least } = pullWindow(o);
  const room = capacity - held;
  return room >= least ? room : 0;
}
