import type { Envelope } from '../envelope.js';
import type { Inbox } from '../inbox.js';
import type { Outcome } from '../outcome.js';
import type { Gate } from './isolation-gate.js';
import type { StartCounter } from './start-counter.js';

/** What {@link processGroup} runs a group through. */
export interface ProcessGroupDeps<R> {
  inbox: Pick<Inbox<R>, 'process' | 'processBatch'>;
  gate: Gate;
  counter: Pick<StartCounter<R>, 'mark'>;
}

/**
 * Runs one group of deliveries through the inbox behind the isolation gate: a suspect group (one
 * redelivered message, which may be the one that killed the process) exclusive and marked for the
 * start counter, a fresh group shared. One envelope goes through `process`, more through
 * `processBatch` (one transaction). The gate is left before this returns or throws. It throws what
 * the inbox throws, which answers every message with an outcome and throws for none: a throw is a
 * bug, and the adapter hands the group back to its broker.
 */
export async function processGroup<R>(
  deps: ProcessGroupDeps<R>,
  envelopes: readonly Envelope[],
  suspect: boolean,
): Promise<Outcome<R>[]> {
  const leave = suspect ? await deps.gate.exclusive() : await deps.gate.shared();
  try {
    if (suspect) deps.counter.mark(envelopes[0]!);
    return envelopes.length > 1
      ? await deps.inbox.processBatch(envelopes)
      : [await deps.inbox.process(envelopes[0]!)];
  } finally {
    leave();
  }
}

/**
 * Takes the next group off the front of `queue` (removing it): a suspect delivery (redelivered:
 * it may be the one that killed the process) alone, else fresh ones up to `max`, stopping before
 * the next suspect. `max` is the batch size, 1 without batching. `queue` must not be empty.
 */
export function takeGroup<T>(
  queue: T[],
  isSuspect: (item: T) => boolean,
  max: number,
): { group: T[]; suspect: boolean } {
  const suspect = isSuspect(queue[0]!);
  let n = 1;
  if (!suspect) while (n < max && n < queue.length && !isSuspect(queue[n]!)) n++;
  return { group: queue.splice(0, n), suspect };
}
