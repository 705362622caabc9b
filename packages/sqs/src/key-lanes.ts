import { runsAlone, takeGroup } from '@once/core/adapter';
import type { Held } from './held.js';

/** What one lane is running or will run. */
interface Lane {
  pending: Held[];
  /** Messages pending or in the run in progress. */
  load: number;
  running: boolean;
}

/**
 * Forms batches by `keyOf` key on standard queues: a fixed number of lanes, each running one
 * batch at a time. A key belongs to one lane while any message of it is pending or running there,
 * and every message of that key joins it; a key no lane holds goes to the least loaded lane. So
 * messages of one key are never in two transactions at once, the lanes' batches run in parallel,
 * and a batch grows with what arrived for its lane while the previous one ran (from any receive),
 * up to `maxBatch`. A message without a key goes to the least loaded lane and binds nothing.
 *
 * Redelivered messages run one per transaction (`batch` false), in their lane's order: any of
 * them may be the message that killed the last consumer.
 */
export class KeyLanes {
  readonly #lanes: Lane[];
  /** Key -> its lane, and how many of its messages are pending or running there. */
  readonly #owners = new Map<string, { lane: Lane; count: number }>();
  readonly #maxBatch: number;
  readonly #run: (entries: Held[], batch: boolean) => Promise<void>;
  readonly #track: (p: Promise<unknown>) => void;

  constructor(spec: {
    lanes: number;
    maxBatch: number;
    /** Runs one batch (or, `batch` false, one redelivered message); must not reject. */
    run: (entries: Held[], batch: boolean) => Promise<void>;
    /** Registers a lane's work, which stop() waits for. */
    track: (p: Promise<unknown>) => void;
  }) {
    this.#lanes = Array.from({ length: spec.lanes }, () => ({ pending: [], load: 0, running: false }));
    this.#maxBatch = spec.maxBatch;
    this.#run = spec.run;
    this.#track = spec.track;
  }

  /** Keys held by a lane right now. */
  get keys(): number {
    return this.#owners.size;
  }

  add(entries: readonly Held[]): void {
    const woken = new Set<Lane>();
    for (const e of entries) {
      const owner = e.key === undefined ? undefined : this.#owners.get(e.key);
      const lane = owner?.lane ?? this.#leastLoaded();
      if (owner) owner.count++;
      else if (e.key !== undefined) this.#owners.set(e.key, { lane, count: 1 });
      lane.pending.push(e);
      lane.load++;
      woken.add(lane);
    }
    for (const lane of woken) {
      if (lane.running) continue;
      lane.running = true;
      this.#track(this.#drain(lane));
    }
  }

  #leastLoaded(): Lane {
    let best = this.#lanes[0]!;
    for (const lane of this.#lanes) if (lane.load < best.load) best = lane;
    return best;
  }

  async #drain(lane: Lane): Promise<void> {
    try {
      while (lane.pending.length > 0) {
        const { group: take, suspect: alone } = takeGroup(
          lane.pending,
          (e) => runsAlone(e.envelope.redelivered, e.envelope.attempt),
          this.#maxBatch,
        );
        try {
          await this.#run(take, !alone);
        } finally {
          lane.load -= take.length;
          for (const e of take) this.#release(e);
        }
      }
    } finally {
      // Also after a run that threw: the next add() starts the lane again.
      lane.running = false;
    }
  }

  #release(e: Held): void {
    if (e.key === undefined) return;
    const owner = this.#owners.get(e.key);
    if (owner && --owner.count === 0) this.#owners.delete(e.key);
  }
}
