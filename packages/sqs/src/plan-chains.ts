import type { Held } from './held.js';

/**
 * Messages to run in order, after every earlier chain holding one of `keys`: its FIFO groups
 * (`g:` + group) and its `keyOf` keys (`k:` + key).
 */
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
 * Splits one receive into chains. The consumer runs a chain only after every earlier chain that
 * holds one of its keys has settled, so one FIFO group, and one `keyOf` key (set in batch mode
 * only), is never in two transactions at once.
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
    if (entries.length > 0) chains.push({ keys: keysOf(entries), entries: [...entries], batch: true });
  } else if (s.fifo) {
    const groups = new Map<string, Held[]>();
    for (const e of entries) {
      const key = e.group ?? e.receipt;
      const list = groups.get(key);
      if (list) list.push(e);
      else groups.set(key, [e]);
    }
    for (const list of groups.values()) chains.push({ keys: keysOf(list), entries: list, batch: false });
  } else {
    const redelivered = entries.filter((e) => e.envelope.redelivered);
    if (redelivered.length > 0)
      chains.push({ keys: keysOf(redelivered), entries: redelivered, batch: false });
    for (const e of entries)
      if (!e.envelope.redelivered) chains.push({ keys: keysOf([e]), entries: [e], batch: false });
  }
  return chains;
}

/** The keys a chain of `entries` holds: their groups and their `keyOf` keys, each once. */
function keysOf(entries: readonly Held[]): string[] {
  const keys = new Set<string>();
  for (const e of entries) {
    if (e.group !== undefined) keys.add(`g:${e.group}`);
    if (e.key !== undefined) keys.add(`k:${e.key}`);
  }
  return [...keys];
}
