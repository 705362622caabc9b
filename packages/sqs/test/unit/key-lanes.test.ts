import type { Envelope } from '@once/core';
import { describe, expect, it } from 'vitest';
import type { Held } from '../../src/held.js';
import { KeyLanes } from '../../src/key-lanes.js';

function held(id: string, key: string | undefined, redelivered = false): Held {
  const envelope: Envelope = {
    id,
    body: Buffer.from(id),
    headers: {},
    source: { broker: 'sqs', queue: 'q' },
    attempt: redelivered ? 2 : 1,
    redelivered,
  };
  return {
    message: { MessageId: id },
    envelope,
    receipt: `r-${id}`,
    group: undefined,
    key,
    receivedAt: 0,
    extendedAt: 0,
    capped: false,
    settling: false,
  };
}
const tick = (ms = 2) => new Promise((r) => setTimeout(r, ms));

/** Lanes whose runs take `ms` and record what ran together, and which keys were running at once. */
function lanes(n: number, maxBatch = 10, ms = 5) {
  const runs: { ids: string[]; batch: boolean }[] = [];
  const running = new Map<string, number>();
  const overlaps: string[] = [];
  let peak = 0;
  let active = 0;
  const tasks = new Set<Promise<unknown>>();
  const l = new KeyLanes({
    lanes: n,
    maxBatch,
    run: async (entries, batch) => {
      runs.push({ ids: entries.map((e) => e.envelope.id!), batch });
      active++;
      peak = Math.max(peak, active);
      const keys = new Set(entries.flatMap((e) => (e.key === undefined ? [] : [e.key])));
      for (const k of keys) {
        if (running.has(k)) overlaps.push(k);
        running.set(k, (running.get(k) ?? 0) + 1);
      }
      await tick(ms);
      for (const k of keys) {
        const left = running.get(k)! - 1;
        if (left === 0) running.delete(k);
        else running.set(k, left);
      }
      active--;
    },
    track: (p) => {
      tasks.add(p);
      void p.finally(() => tasks.delete(p));
    },
  });
  const idle = async () => {
    while (tasks.size > 0) await Promise.all([...tasks]);
  };
  return { l, runs, overlaps, idle, peak: () => peak };
}

describe('KeyLanes', () => {
  it('never runs one key in two batches at once; keys spread over lanes run in parallel', async () => {
    const { l, runs, overlaps, idle, peak } = lanes(4);
    // Four receives of ten, each holding every one of ten accounts, arriving while lanes run.
    for (let r = 0; r < 4; r++) {
      l.add(Array.from({ length: 10 }, (_, i) => held(`m${r}-${i}`, `acct-${(i + r) % 10}`)));
      await tick(1);
    }
    await idle();
    expect(overlaps).toEqual([]);
    expect(runs.flatMap((r) => r.ids).sort()).toHaveLength(40);
    expect(new Set(runs.flatMap((r) => r.ids)).size).toBe(40);
    expect(peak()).toBeGreaterThan(1);
    expect(peak()).toBeLessThanOrEqual(4);
    // Messages that arrived while their lane ran were batched together, from several receives.
    expect(Math.max(...runs.map((r) => r.ids.length))).toBeGreaterThan(1);
    expect(runs.every((r) => r.batch)).toBe(true);
    expect(l.keys).toBe(0);
  });

  it('a key stays with its lane while any of its messages is pending there, then is free again', async () => {
    const { l, runs, idle } = lanes(2, 10, 10);
    l.add([held('a1', 'a'), held('b1', 'b')]);
    l.add([held('a2', 'a'), held('b2', 'b'), held('a3', 'a')]);
    await idle();
    const runOf = (id: string) => runs.findIndex((r) => r.ids.includes(id));
    // a1 and b1 started at once on different lanes; a2 and a3 waited for a1's lane, b2 for b1's.
    expect(runs[0]!.ids).toEqual(['a1']);
    expect(runs[1]!.ids).toEqual(['b1']);
    expect(runs.find((r) => r.ids.includes('a2'))!.ids).toEqual(['a2', 'a3']);
    expect(runs.find((r) => r.ids.includes('b2'))!.ids).toEqual(['b2']);
    expect(runOf('a2')).toBeGreaterThan(runOf('a1'));
    expect(l.keys).toBe(0);
  });

  it('caps a batch at maxBatch, and runs a redelivered message on its own', async () => {
    const { l, runs, idle } = lanes(1, 3, 5);
    l.add([held('x0', 'k')]);
    l.add([
      held('x1', 'k'),
      held('x2', 'k'),
      held('x3', 'k'),
      held('x4', 'k'),
      held('r', 'k', true),
      held('x5', undefined),
    ]);
    await idle();
    expect(runs).toEqual([
      { ids: ['x0'], batch: true },
      { ids: ['x1', 'x2', 'x3'], batch: true },
      { ids: ['x4'], batch: true },
      { ids: ['r'], batch: false },
      { ids: ['x5'], batch: true },
    ]);
  });

  it('keeps going after a run throws', async () => {
    let first = true;
    const ran: string[] = [];
    const tasks: Promise<unknown>[] = [];
    const l = new KeyLanes({
      lanes: 1,
      maxBatch: 10,
      run: async (entries) => {
        ran.push(...entries.map((e) => e.envelope.id!));
        if (first) {
          first = false;
          throw new Error('unexpected');
        }
      },
      track: (p) => tasks.push(p.catch(() => {})),
    });
    l.add([held('a', 'k')]);
    await Promise.all(tasks);
    l.add([held('b', 'k')]);
    await Promise.all(tasks);
    expect(ran).toEqual(['a', 'b']);
    expect(l.keys).toBe(0);
  });
});
