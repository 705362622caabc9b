import type { Held } from './held.js';

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
}

/**
 * Splits one receive into chains.
 * - FIFO: one chain per message group, in receive order (which is the group's order); groups
 *   run in parallel, so none waits behind another.
 * - Standard: no order to keep; fresh messages each run alone, in parallel. Redelivered ones go
 *   into one chain, one after another.
 * - Batch mode: the whole receive is one chain and one transaction (groups still in order),
 *   unless a message is redelivered: then message by message, so that a message that kills the
 *   process is counted alone (run-chain runs redelivered messages one at a time across the
 *   consumer and counts their starts in Postgres first).
 */
export function planChains(entries: readonly Held[], s: PlanSettings): Chain[] {
  const chains: Chain[] = [];
  if (s.batch && !entries.some((e) => e.envelope.redelivered)) {
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
  return chains;
}
