/**
 * Run planning, pure. Owns one decision: which messages share a transaction, and what a stop
 * means for the rest. Fresh messages (first delivery) in a row share one batch; a redelivered
 * message runs alone (any may be the message that killed the last consumer). A `retry`, `busy` or
 * `not-run` outcome stops the run: every later message is `not-run` (`behind`).
 */

import type { PermanentError } from '../errors.js';
import type { Envelope } from '../message/envelope.js';
import type { Outcome } from '../message/outcome.js';
import type { Item, Prepared } from './item.js';

/** One unit of work, in input order. */
export type Run =
  /** One message in its own transaction. */
  | { kind: 'one'; item: Item }
  /** Two or more fresh messages in one inbox transaction. */
  | { kind: 'batch'; items: Item[] }
  /** No usable id: failed at once. */
  | { kind: 'invalid-id'; envelope: Envelope; error: unknown }
  /** `fingerprintOf` threw: recorded failed under the id. */
  | { kind: 'unplaceable'; item: Item; error: PermanentError };

/**
 * Whether a delivery runs alone: one per transaction in the engine, and in the adapter kit's
 * pipeline alone in the whole process (the isolation gate held exclusive) with its start counted.
 * A delivery the broker redelivered, or one past its first attempt, may be the message that killed
 * the last consumer. The one predicate for both (the pipeline asks it before it makes envelopes,
 * hence the two fields rather than an envelope).
 */
export function runsAlone(redelivered: boolean, attempt: number): boolean {
  return redelivered || attempt !== 1;
}

/** A first delivery, as far as the broker can tell: not {@link runsAlone}. */
export function isFresh(envelope: Envelope): boolean {
  return !runsAlone(envelope.redelivered, envelope.attempt);
}

/**
 * Cuts prepared messages into runs, keeping their order. `batched`: fresh messages may share a
 * transaction (false for {@link Inbox.process}, while batching is paused, and for suspects whose
 * starts are counted).
 */
export function planRuns(prepared: readonly Prepared[], batched: boolean): Run[] {
  const runs: Run[] = [];
  let items: Item[] = [];
  const cut = (): void => {
    if (items.length > 0)
      runs.push(items.length === 1 ? { kind: 'one', item: items[0]! } : { kind: 'batch', items });
    items = [];
  };
  for (const p of prepared) {
    if (p.kind !== 'item') {
      cut();
      runs.push(p.kind === 'invalid-id' ? p : { kind: 'unplaceable', item: p.item, error: p.error });
      continue;
    }
    const item = p.item;
    if (!batched || !isFresh(item.envelope)) {
      cut();
      runs.push({ kind: 'one', item });
    } else {
      items.push(item);
    }
  }
  cut();
  return runs;
}

/** Whether an outcome stops the messages after it: they must wait for it to be redelivered. */
export function isStop(o: Outcome): boolean {
  return o.status === 'retry' || o.status === 'busy' || o.status === 'not-run';
}

/** The envelopes a run holds, with their ids when they have one. */
function membersOf(run: Run): { envelope: Envelope; id: string | undefined }[] {
  switch (run.kind) {
    case 'one':
    case 'unplaceable':
      return [{ envelope: run.item.envelope, id: run.item.id }];
    case 'batch':
      return run.items.map((it) => ({ envelope: it.envelope, id: it.id }));
    case 'invalid-id':
      return [{ envelope: run.envelope, id: undefined }];
  }
}

/**
 * Executes runs in order until one ends in a stop; every message after it comes back from
 * `notRun`. Outcomes come back in input order, one per message.
 */
export async function runInOrder<R, T extends Run>(
  runs: readonly T[],
  exec: (run: T) => Promise<Outcome<R>[]> | Outcome<R>[],
  notRun: (envelope: Envelope, id: string | undefined) => Outcome<R>,
): Promise<Outcome<R>[]> {
  // One run (a whole batch of fresh messages, the usual case): its outcomes are the answer.
  if (runs.length === 1) return exec(runs[0]!);
  const out: Outcome<R>[] = [];
  let stopped = false;
  for (const run of runs) {
    if (stopped) {
      for (const m of membersOf(run)) out.push(notRun(m.envelope, m.id));
      continue;
    }
    for (const o of await exec(run)) {
      out.push(o);
      if (isStop(o)) stopped = true;
    }
  }
  return out;
}
