/**
 * Per-partition fetch loops over a client that has no `eachBatch` (issue #30): once's
 * {@link PartitionBatch} built from fetches, with per-partition pause, resume and seek. Pure logic
 * over {@link FetcherDeps}; `platformatic.ts` gives it the library's fetch, metadata and commit.
 *
 * - A partition is fetched only while it is assigned, not paused, has a position and has no batch
 *   queued or running: its next batch waits until the previous `eachBatch` for it returned.
 * - Fetches go one at a time per broker (a fetch session and a connection are per broker), each
 *   carrying every ready partition that broker leads. A fetch or lookup that has not settled after
 *   `fetchTimeoutMs` is abandoned, so a lost response cannot hold the broker's partitions forever.
 * - At most `concurrency` `eachBatch` calls run at once.
 * - After a batch the position is the offset after the last resolved one, or the batch's first
 *   offset when none was resolved; a seek during the batch wins.
 * - A revocation is known synchronously ({@link PartitionFetcher.setAssignment}): from then on the
 *   partition's batches are stale, their heartbeat and commit reject with {@link PartitionRevokedError},
 *   and a commit already in the library's retry loop sends nothing for it.
 * - A partition kept across a new assignment goes on from the group's committed offset, read again
 *   before its next fetch, as a newly assigned one does (and as kafkajs does after every
 *   rebalance). The committed offset may be further than the position: the member missed a
 *   generation (a rejoin whose SyncGroup failed and was retried) in which another member owned the
 *   partition and committed further. It may be behind: the member's last commit was refused as
 *   its generation ended, after the batch's messages were resolved; going on from the position
 *   would never commit them, and with no newer message the group would stay behind for good. The
 *   messages read again are answered by the inbox as duplicates, and committed.
 */
import type { ClientMessage, PartitionBatch } from './types.js';

/** One partition of a fetch request. */
export interface FetchPart {
  /** The topic. */
  topic: string;
  /** The partition of `topic`. */
  partition: number;
  /** The first offset wanted. */
  offset: bigint;
}

/** What a fetch returned for one partition. */
export interface FetchedPart {
  /** The topic. */
  topic: string;
  /** The partition of `topic`. */
  partition: number;
  /** Data messages at or after the requested offset, in offset order. */
  messages: ClientMessage[];
  /** Where to fetch next when `messages` is empty (past control or filtered batches); absent: unchanged. */
  next?: bigint;
  /** The requested offset is outside the log: the position is reset by the group's reset policy. */
  outOfRange?: boolean;
}

/** What {@link PartitionFetcher} needs of the client library. */
export interface FetcherDeps {
  /** The broker that serves fetches of the partition (its leader). */
  nodeOf(topic: string, partition: number): Promise<number>;
  /** One fetch from `node` for `parts` (long-polls when nothing is there). */
  fetch(node: number, parts: readonly FetchPart[]): Promise<FetchedPart[]>;
  /** The starting position of a newly assigned partition: its committed offset, else the reset policy's. */
  position(topic: string, partition: number): Promise<bigint>;
  /** The group's committed offset of the partition; undefined when it has none. */
  committed(topic: string, partition: number): Promise<bigint | undefined>;
  /** The reset policy's offset (the earliest or the end of the log). */
  reset(topic: string, partition: number): Promise<bigint>;
  /**
   * Commits `next` for the partition. `owned()` is read each time the library builds the request
   * (its own retries included): false means send nothing for this partition.
   */
  commit(topic: string, partition: number, next: bigint, owned: () => boolean): Promise<void>;
  /** A fault of a fetch, a position lookup or an `eachBatch` call (the loop retries after `retryDelayMs`). */
  onError(where: string, error: unknown): void;
  /** True for an error meaning the generation is over (not reported through `onError`). */
  isOwnershipLost(error: unknown): boolean;
  /** Wait after a failed fetch or lookup, ms. */
  retryDelayMs: number;
  /**
   * A fetch, leader or position lookup not settled after this long is abandoned (a failure: tried
   * again after `retryDelayMs`; its late result dropped), ms.
   */
  fetchTimeoutMs: number;
}

/** The partition was revoked from this member: no heartbeat or commit for it from this batch. */
export class PartitionRevokedError extends Error {
  /** Marks the error for {@link isPartitionRevoked} across module copies. */
  readonly partitionRevoked = true;
  /**
   * @param topic - the revoked partition's topic.
   * @param partition - the revoked partition.
   */
  constructor(
    readonly topic: string,
    readonly partition: number,
  ) {
    super(`partition ${topic}/${partition} was revoked from this member`);
    this.name = 'PartitionRevokedError';
  }
}

/** True for a {@link PartitionRevokedError}. */
export function isPartitionRevoked(err: unknown): boolean {
  return (err as { partitionRevoked?: unknown } | null)?.partitionRevoked === true;
}

/** The assignment diff: partitions `next` adds to `prev`, and those it drops. */
export function diffAssignment(
  prev: Readonly<Record<string, readonly number[]>>,
  next: Readonly<Record<string, readonly number[]>>,
): { added: [string, number][]; revoked: [string, number][] } {
  const keys = (a: Readonly<Record<string, readonly number[]>>) => {
    const out = new Map<string, [string, number]>();
    for (const [t, ps] of Object.entries(a)) for (const p of ps) out.set(`${t}\u0000${p}`, [t, p]);
    return out;
  };
  const a = keys(prev);
  const b = keys(next);
  return {
    added: [...b].filter(([k]) => !a.has(k)).map(([, v]) => v),
    revoked: [...a].filter(([k]) => !b.has(k)).map(([, v]) => v),
  };
}

interface Part {
  readonly topic: string;
  readonly partition: number;
  /** Next offset to fetch; undefined until looked up. */
  position: bigint | undefined;
  /** The next lookup uses the reset policy, not the committed offset. */
  resetNeeded: boolean;
  /**
   * Kept across a new assignment: before the next fetch the committed offset is read again and
   * the position set to it (another member may have committed further meanwhile, or this member's
   * last commit may have been refused).
   */
  recheck: boolean;
  resolving: boolean;
  fetching: boolean;
  /** A batch is queued or running. */
  busy: boolean;
  /** Counts seeks: a batch fetched before one is stale. */
  seeks: number;
  revoked: boolean;
}

const keyOf = (topic: string, partition: number) => `${topic}\u0000${partition}`;

/** Fetch loops per partition, with once's batch rules. */
export class PartitionFetcher {
  readonly #d: FetcherDeps;
  readonly #parts = new Map<string, Part>();
  readonly #pausedTopics = new Set<string>();
  readonly #pausedParts = new Set<string>();
  readonly #inflight = new Set<number>();
  readonly #queue: (() => Promise<void>)[] = [];
  readonly #running = new Set<Promise<void>>();
  readonly #timers = new Set<NodeJS.Timeout>();
  #assignment: Record<string, number[]> = {};
  #eachBatch: ((batch: PartitionBatch) => Promise<void>) | undefined;
  #concurrency = 1;
  #stopping = false;
  #pumping = false;
  #dirty = false;

  /** @param deps - the client library's side. */
  constructor(deps: FetcherDeps) {
    this.#d = deps;
  }

  /** The current assignment, by topic. */
  get assignment(): Readonly<Record<string, readonly number[]>> {
    return this.#assignment;
  }

  /** True while the partition is assigned (a commit for it may be sent). */
  owns(topic: string, partition: number): boolean {
    const p = this.#parts.get(keyOf(topic, partition));
    return p !== undefined && !p.revoked;
  }

  /** Starts delivering batches to `eachBatch`, at most `concurrency` at once. */
  start(concurrency: number, eachBatch: (batch: PartitionBatch) => Promise<void>): void {
    this.#eachBatch = eachBatch;
    this.#concurrency = Math.max(1, Math.floor(concurrency));
    this.#stopping = false;
    this.#wake();
  }

  /**
   * The member's full new assignment. Dropped partitions are revoked at once (their batches go
   * stale, their commits stop); added ones start from their committed offset; kept ones go on from
   * their committed offset too (read before their next fetch), or from their position when the
   * group has none.
   */
  setAssignment(assignment: Readonly<Record<string, readonly number[]>>): void {
    const { added, revoked } = diffAssignment(this.#assignment, assignment);
    for (const [t, p] of revoked) {
      const key = keyOf(t, p);
      const part = this.#parts.get(key);
      if (part) part.revoked = true;
      this.#parts.delete(key);
      this.#pausedParts.delete(key);
    }
    // Kept: another member may have committed further in a generation this one missed, or this
    // member's last commit may have been refused as its generation ended.
    for (const part of this.#parts.values()) part.recheck = true;
    for (const [topic, partition] of added) {
      this.#parts.set(keyOf(topic, partition), {
        topic,
        partition,
        position: undefined,
        resetNeeded: false,
        recheck: false,
        resolving: false,
        fetching: false,
        busy: false,
        seeks: 0,
        revoked: false,
      });
    }
    this.#assignment = Object.fromEntries(
      Object.entries(assignment).map(([t, ps]) => [t, [...ps].sort((a, b) => a - b)]),
    );
    this.#wake();
  }

  /** Stops fetching the partitions (every partition of `topic` without `partitions`). */
  pause(topic: string, partitions?: readonly number[]): void {
    if (partitions === undefined) this.#pausedTopics.add(topic);
    else for (const p of partitions) this.#pausedParts.add(keyOf(topic, p));
  }

  /** Fetches the partitions again (every partition of `topic`, each one's own pause too, without `partitions`). */
  resume(topic: string, partitions?: readonly number[]): void {
    if (partitions === undefined) {
      this.#pausedTopics.delete(topic);
      for (const key of [...this.#pausedParts])
        if (key.startsWith(`${topic}\u0000`)) this.#pausedParts.delete(key);
    } else for (const p of partitions) this.#pausedParts.delete(keyOf(topic, p));
    this.#wake();
  }

  /** The partition's next batch starts at `offset`; a batch of it fetched before is stale. Unassigned: ignored. */
  seek(topic: string, partition: number, offset: string): void {
    const part = this.#parts.get(keyOf(topic, partition));
    if (!part) return;
    part.position = BigInt(offset);
    part.resetNeeded = false;
    part.seeks += 1;
    this.#wake();
  }

  /** Stops fetching, drops queued batches, and waits for the running `eachBatch` calls. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    this.#queue.length = 0;
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
    // Dropped batches left their partitions busy: a later start fetches them again.
    for (const part of this.#parts.values()) part.busy = false;
  }

  #paused(part: Part): boolean {
    return this.#pausedTopics.has(part.topic) || this.#pausedParts.has(keyOf(part.topic, part.partition));
  }

  #later(fn: () => void): void {
    const t = setTimeout(() => {
      this.#timers.delete(t);
      fn();
    }, this.#d.retryDelayMs);
    t.unref?.();
    this.#timers.add(t);
  }

  #wake(): void {
    if (this.#stopping || !this.#eachBatch) return;
    this.#dirty = true;
    if (this.#pumping) return;
    this.#pumping = true;
    void this.#pump();
  }

  /**
   * Starts a fetch for every broker that has ready partitions and none in flight. Runs again while
   * woken meanwhile; the flag is cleared in the same turn as the last check, so no wake is lost.
   */
  async #pump(): Promise<void> {
    try {
      while (this.#dirty && !this.#stopping) await this.#pumpOnce();
    } finally {
      this.#pumping = false;
    }
  }

  async #pumpOnce(): Promise<void> {
    {
      this.#dirty = false;
      const byNode = new Map<number, Part[]>();
      for (const part of [...this.#parts.values()]) {
        if (this.#stopping) return;
        if (part.revoked || part.busy || part.fetching || part.resolving || this.#paused(part)) continue;
        if (part.position === undefined || part.recheck) {
          this.#resolve(part);
          continue;
        }
        let node: number;
        try {
          node = await this.#bounded('a leader lookup', this.#d.nodeOf(part.topic, part.partition));
        } catch (err) {
          this.#d.onError('metadata', err);
          this.#later(() => this.#wake());
          continue;
        }
        if (this.#inflight.has(node)) continue;
        const list = byNode.get(node) ?? [];
        list.push(part);
        byNode.set(node, list);
      }
      for (const [node, parts] of byNode) {
        if (this.#stopping) return;
        if (this.#inflight.has(node)) continue;
        // Re-check: an await above may have let a batch, a pause or a revocation in.
        const ready = parts.filter(
          (p) => !p.revoked && !p.busy && !p.fetching && !this.#paused(p) && p.position !== undefined,
        );
        if (ready.length > 0) this.#startFetch(node, ready);
      }
    }
  }

  /** `promise`, or a rejection once it has not settled in `fetchTimeoutMs` (the pump must never wait forever). */
  #bounded<T>(what: string, promise: Promise<T>): Promise<T> {
    const ms = this.#d.fetchTimeoutMs;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what} did not settle in ${ms} ms`)), ms);
      timer.unref?.();
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  /**
   * Looks up where the partition goes on: its starting position when it has none, else (kept
   * across a new assignment) its committed offset, when the group has one.
   */
  #resolve(part: Part): void {
    part.resolving = true;
    const recheck = part.position !== undefined;
    const seeks = part.seeks;
    part.recheck = false;
    const lookup: Promise<bigint | undefined> = this.#bounded(
      'a position lookup',
      recheck
        ? this.#d.committed(part.topic, part.partition)
        : part.resetNeeded
          ? this.#d.reset(part.topic, part.partition)
          : this.#d.position(part.topic, part.partition),
    );
    lookup.then(
      (offset) => {
        part.resolving = false;
        // A seek during the lookup wins.
        if (part.position === undefined) {
          if (offset !== undefined) part.position = offset;
          part.resetNeeded = false;
        } else if (recheck && part.seeks === seeks && offset !== undefined) part.position = offset;
        this.#wake();
      },
      (err) => {
        part.resolving = false;
        if (recheck) part.recheck = true;
        this.#d.onError('position', err);
        this.#later(() => this.#wake());
      },
    );
  }

  #startFetch(node: number, parts: Part[]): void {
    this.#inflight.add(node);
    const sent = parts.map((part) => ({ part, offset: part.position!, seeks: part.seeks }));
    for (const s of sent) s.part.fetching = true;
    let failed = false;
    // A fetch whose promise never settles (its connection replaced under it) must not hold the
    // broker's fetches forever: it is abandoned, and what it brings back later is dropped.
    this.#bounded(
      `a fetch from broker ${node}`,
      this.#d.fetch(
        node,
        sent.map((s) => ({ topic: s.part.topic, partition: s.part.partition, offset: s.offset })),
      ),
    )
      .then(
        (results) => {
          for (const r of results) {
            const s = sent.find((x) => x.part.topic === r.topic && x.part.partition === r.partition);
            if (!s) continue;
            const part = s.part;
            part.fetching = false;
            // Revoked, sought or stopping since the request: what came back is stale.
            if (part.revoked || part.seeks !== s.seeks || this.#stopping) continue;
            if (r.outOfRange) {
              part.position = undefined;
              part.resetNeeded = true;
              continue;
            }
            const messages = r.messages.filter((m) => BigInt(m.offset) >= s.offset);
            if (messages.length > 0) this.#enqueue(part, messages, s.seeks);
            else if (r.next !== undefined && r.next > s.offset) part.position = r.next;
          }
        },
        (err) => {
          failed = true;
          this.#d.onError('fetch', err);
        },
      )
      .finally(() => {
        this.#inflight.delete(node);
        for (const s of sent) s.part.fetching = false;
        if (failed) this.#later(() => this.#wake());
        else this.#wake();
      });
  }

  #enqueue(part: Part, messages: ClientMessage[], seeks: number): void {
    part.busy = true;
    this.#queue.push(() => this.#runBatch(part, messages, seeks));
    this.#drain();
  }

  #drain(): void {
    while (!this.#stopping && this.#running.size < this.#concurrency && this.#queue.length > 0) {
      const job = this.#queue.shift()!;
      const p = job().finally(() => {
        this.#running.delete(p);
        this.#drain();
        this.#wake();
      });
      this.#running.add(p);
    }
  }

  async #runBatch(part: Part, messages: ClientMessage[], seeks: number): Promise<void> {
    const first = BigInt(messages[0]!.offset);
    let resolved: bigint | undefined;
    const stale = () => part.revoked || part.seeks !== seeks || this.#stopping;
    const owned = () => !part.revoked && this.#parts.get(keyOf(part.topic, part.partition)) === part;
    const batch: PartitionBatch = {
      topic: part.topic,
      partition: part.partition,
      messages,
      lastOffset: () => messages[messages.length - 1]!.offset,
      isRunning: () => !this.#stopping,
      isStale: () => part.revoked || part.seeks !== seeks,
      heartbeat: async () => {
        if (!owned()) throw new PartitionRevokedError(part.topic, part.partition);
      },
      resolveOffset: (offset) => {
        const o = BigInt(offset);
        if (resolved === undefined || o > resolved) resolved = o;
      },
      commit: async (next) => {
        if (!owned()) throw new PartitionRevokedError(part.topic, part.partition);
        await this.#d.commit(part.topic, part.partition, BigInt(next), owned);
      },
    };
    try {
      if (!stale()) await this.#eachBatch!(batch);
    } catch (err) {
      if (!this.#d.isOwnershipLost(err) && !isPartitionRevoked(err)) this.#d.onError('eachBatch', err);
    } finally {
      part.busy = false;
      // No seek meanwhile: go on after what was resolved, or read the batch again.
      if (!part.revoked && part.seeks === seeks)
        part.position = resolved === undefined ? first : resolved + 1n;
    }
  }
}
