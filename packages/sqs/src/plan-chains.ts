import type { Held } from './held.js';

/** Shared by the messages of one group in one receive: the first over-budget one is the culprit. */
export interface Guard {
  spent: boolean;
}

/** Messages to run in order, after every earlier chain holding one of `keys` (message groups). */
export interface Chain {
  keys: string[];
  entries: Held[];
  /** One transaction for the whole chain (batch mode) rather than one per message. */
  batch: boolean;
}

/** What {@link planChains} needs to know. */
export interface PlanSettings {
  fifo: boolean;
  batch: boolean;
  maxAttempts: number;
}

/**
 * Splits one receive into chains and gives each message its group's guard.
 * - FIFO: one chain per message group, in receive order (which is the group's order); groups
 *   run in parallel, so none waits behind another.
 * - Standard: no order to keep; fresh messages each run alone, in parallel. Redelivered ones run
 *   one after another, since any of them may be the one that killed the last consumer.
 * - Batch mode: the whole receive is one chain and one transaction (groups still in order),
 *   unless a message is over its attempts budget: then message by message, so the culprit
 *   verdict falls on the right one.
 * The guard: the first message of a group (of the whole receive, on a standard queue) that
 * reaches the handler over its attempts budget is taken for the one that killed a consumer.
 */
export function planChains(
  entries: readonly Held[],
  s: PlanSettings,
): { chains: Chain[]; guards: Map<Held, Guard> } {
  const guards = new Map<Held, Guard>();
  const byGroup = new Map<string | undefined, Guard>();
  for (const e of entries) {
    const g = byGroup.get(e.group) ?? { spent: false };
    byGroup.set(e.group, g);
    guards.set(e, g);
  }
  const chains: Chain[] = [];
  if (s.batch && !entries.some((e) => e.envelope.attempt > s.maxAttempts)) {
    const keys = [...new Set(entries.flatMap((e) => (e.group === undefined ? [] : [e.group])))];
    if (entries.length > 0) chains.push({ keys, entries: [...entries], batch: true });
  } else if (s.fifo) {
    const groups = new Map<string, Held[]>();
    for (const e of entries) {
      const key = e.group ?? e.receipt;
      const list = groups.get(key);
      if (list) list.push(e);
      else groups.set(key, [e]);
    }
    for (const [key, list] of groups) chains.push({ keys: [key], entries: list, batch: false });
  } else {
    const redelivered = entries.filter((e) => e.envelope.redelivered);
    if (redelivered.length > 0) chains.push({ keys: [], entries: redelivered, batch: false });
    for (const e of entries)
      if (!e.envelope.redelivered) chains.push({ keys: [], entries: [e], batch: false });
  }
  return { chains, guards };
}
