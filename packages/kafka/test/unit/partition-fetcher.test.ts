import { describe, expect, it } from 'vitest';
import {
  diffAssignment,
  type FetchedPart,
  type FetcherDeps,
  type FetchPart,
  isPartitionRevoked,
  PartitionFetcher,
  PartitionRevokedError,
} from '../../src/client/partition-fetcher.js';
import type { ClientMessage, PartitionBatch } from '../../src/client/types.js';

/** A fake log per partition behind our own FetcherDeps (no broker): fetches, commits and positions recorded. */
function fakeLog(opts: {
  partitions: Record<string, number>;
  committed?: Record<string, bigint>;
  perFetch?: number;
}) {
  const logs = new Map<string, number>(Object.entries(opts.partitions));
  const fetches: { node: number; parts: FetchPart[] }[] = [];
  const commits: { key: string; next: bigint; sent: boolean }[] = [];
  const inflightByNode = new Map<number, number>();
  let maxInflightPerNode = 0;
  const msg = (offset: bigint): ClientMessage => ({
    offset: offset.toString(),
    key: null,
    value: Buffer.from(String(offset)),
    timestamp: '0',
  });
  const deps: FetcherDeps = {
    nodeOf: async (_t, p) => p % 2,
    fetch: async (node, parts) => {
      fetches.push({ node, parts: parts.map((p) => ({ ...p })) });
      const n = (inflightByNode.get(node) ?? 0) + 1;
      inflightByNode.set(node, n);
      maxInflightPerNode = Math.max(maxInflightPerNode, n);
      await new Promise((r) => setTimeout(r, 1));
      inflightByNode.set(node, n - 1);
      return parts.map((p): FetchedPart => {
        const end = BigInt(logs.get(`${p.topic}/${p.partition}`) ?? 0);
        const messages: ClientMessage[] = [];
        // Whole "record batches" from 0: the fetcher must drop offsets below the one asked for.
        const from = p.offset - (p.offset % 4n);
        for (let o = from; o < end && messages.length < (opts.perFetch ?? 5); o++) messages.push(msg(o));
        return { topic: p.topic, partition: p.partition, messages };
      });
    },
    position: async (t, p) => opts.committed?.[`${t}/${p}`] ?? 0n,
    committed: async (t, p) => opts.committed?.[`${t}/${p}`],
    reset: async () => 0n,
    commit: async (t, p, next, owned) => {
      await new Promise((r) => setTimeout(r, 1));
      commits.push({ key: `${t}/${p}`, next, sent: owned() });
    },
    onError: () => {},
    isOwnershipLost: (err) => isPartitionRevoked(err),
    retryDelayMs: 5,
    fetchTimeoutMs: 1_000,
  };
  return { deps, fetches, commits, logs, maxInflight: () => maxInflightPerNode };
}

const until = async (cond: () => boolean, ms = 3_000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 2));
  }
};

describe('diffAssignment', () => {
  it('says which partitions a join adds and which it drops', () => {
    expect(diffAssignment({ a: [0, 1], b: [2] }, { a: [1, 3], c: [0] })).toEqual({
      added: [
        ['a', 3],
        ['c', 0],
      ],
      revoked: [
        ['a', 0],
        ['b', 2],
      ],
    });
    expect(diffAssignment({}, {})).toEqual({ added: [], revoked: [] });
  });

  it('does not confuse topics whose names share a prefix or contain a slash', () => {
    expect(diffAssignment({ 'a/1': [0] }, { a: [10] })).toEqual({
      added: [['a', 10]],
      revoked: [['a/1', 0]],
    });
  });
});

describe('PartitionFetcher', () => {
  it('delivers every offset once, in order per partition, from the committed position', async () => {
    const log = fakeLog({ partitions: { 't/0': 23, 't/1': 9, 't/2': 0 }, committed: { 't/0': 3n } });
    const f = new PartitionFetcher(log.deps);
    const seen = new Map<number, string[]>();
    f.start(2, async (b) => {
      const list = seen.get(b.partition) ?? [];
      for (const m of b.messages) list.push(m.offset);
      seen.set(b.partition, list);
      b.resolveOffset(b.lastOffset());
    });
    f.setAssignment({ t: [0, 1, 2] });
    await until(() => (seen.get(0)?.length ?? 0) >= 20 && (seen.get(1)?.length ?? 0) >= 9);
    await f.stop();
    expect(seen.get(0)).toEqual(Array.from({ length: 20 }, (_, i) => String(i + 3)));
    expect(seen.get(1)).toEqual(Array.from({ length: 9 }, (_, i) => String(i)));
    expect(seen.get(2)).toBeUndefined();
    // One fetch per broker at a time (a fetch session is per broker).
    expect(log.maxInflight()).toBe(1);
  });

  it("never fetches a partition again before its previous batch's eachBatch returned, and runs at most `concurrency` at once", async () => {
    const log = fakeLog({ partitions: { 't/0': 30, 't/1': 30, 't/2': 30, 't/3': 30 } });
    const f = new PartitionFetcher(log.deps);
    const running = new Set<number>();
    let maxRunning = 0;
    let overlapped = false;
    let done = 0;
    f.start(2, async (b) => {
      if (running.has(b.partition)) overlapped = true;
      running.add(b.partition);
      maxRunning = Math.max(maxRunning, running.size);
      await new Promise((r) => setTimeout(r, 3));
      b.resolveOffset(b.lastOffset());
      running.delete(b.partition);
      done += b.messages.length;
    });
    f.setAssignment({ t: [0, 1, 2, 3] });
    await until(() => done >= 120);
    await f.stop();
    expect(overlapped).toBe(false);
    expect(maxRunning).toBeLessThanOrEqual(2);
    expect(done).toBe(120);
  });

  it('reads from the first unresolved offset after a batch, or the whole batch again when none was resolved', async () => {
    const log = fakeLog({ partitions: { 't/0': 10 } });
    const f = new PartitionFetcher(log.deps);
    const firsts: string[] = [];
    let calls = 0;
    f.start(1, async (b) => {
      calls += 1;
      firsts.push(b.messages[0]!.offset);
      if (calls === 1)
        b.resolveOffset('1'); // 0..1 done, 2.. again
      else if (calls === 2)
        return; // nothing resolved: the same batch again
      else b.resolveOffset(b.lastOffset());
    });
    f.setAssignment({ t: [0] });
    await until(() => calls >= 4);
    await f.stop();
    expect(firsts.slice(0, 4)).toEqual(['0', '2', '2', '5']);
  });

  it('pause and seek per partition: a paused partition is not fetched, a seek wins over the resolved offset and makes the batch stale', async () => {
    const log = fakeLog({ partitions: { 't/0': 50, 't/1': 50 } });
    const f = new PartitionFetcher(log.deps);
    const firsts: string[] = [];
    const staleAfterSeek: boolean[] = [];
    let p1 = 0;
    f.start(2, async (b) => {
      if (b.partition === 1) {
        p1 += 1;
        b.resolveOffset(b.lastOffset());
        return;
      }
      firsts.push(b.messages[0]!.offset);
      if (firsts.length === 1) {
        b.resolveOffset('3');
        f.pause('t', [0]);
        f.seek('t', 0, '2');
        staleAfterSeek.push(b.isStale());
      } else b.resolveOffset(b.lastOffset());
    });
    f.setAssignment({ t: [0, 1] });
    await until(() => firsts.length === 1 && p1 >= 3);
    const fetchedWhilePaused = log.fetches.slice(-3).some((x) => x.parts.some((p) => p.partition === 0));
    expect(fetchedWhilePaused).toBe(false);
    f.resume('t', [0]);
    await until(() => firsts.length >= 2);
    await f.stop();
    expect(staleAfterSeek).toEqual([true]);
    expect(firsts.slice(0, 2)).toEqual(['0', '2']);
  });

  it('pausing a topic holds every partition; resuming it lifts the partitions’ own pauses too (as kafkajs does)', async () => {
    const log = fakeLog({ partitions: { 't/0': 5, 't/1': 5 } });
    const f = new PartitionFetcher(log.deps);
    let got = 0;
    f.pause('t');
    f.pause('t', [1]);
    f.start(2, async (b) => {
      got += b.messages.length;
      b.resolveOffset(b.lastOffset());
    });
    f.setAssignment({ t: [0, 1] });
    await new Promise((r) => setTimeout(r, 30));
    expect(got).toBe(0);
    f.resume('t');
    await until(() => got === 10);
    await f.stop();
  });

  it('a revoked partition: its batch is stale, its heartbeat and commit reject as revoked, a commit in flight sends nothing', async () => {
    const log = fakeLog({ partitions: { 't/0': 8, 't/1': 8 } });
    const f = new PartitionFetcher(log.deps);
    const outcomes: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    f.start(2, async (b: PartitionBatch) => {
      if (b.partition !== 0) {
        b.resolveOffset(b.lastOffset());
        return;
      }
      await b.commit('1', null); // owned: sent
      await gate;
      outcomes.push(`stale=${b.isStale()}`);
      await b.heartbeat().then(
        () => outcomes.push('heartbeat ok'),
        (e) => outcomes.push(`heartbeat ${e instanceof PartitionRevokedError}`),
      );
      await b.commit('2', null).then(
        () => outcomes.push('commit ok'),
        (e) => outcomes.push(`commit ${isPartitionRevoked(e)}`),
      );
      throw new PartitionRevokedError('t', 0);
    });
    f.setAssignment({ t: [0, 1] });
    await until(() => log.commits.length === 1);
    f.setAssignment({ t: [1] });
    expect(f.owns('t', 0)).toBe(false);
    release();
    await until(() => outcomes.length === 3);
    await f.stop();
    expect(outcomes).toEqual(['stale=true', 'heartbeat true', 'commit true']);
    expect(log.commits).toEqual([{ key: 't/0', next: 1n, sent: true }]);
  });

  it('a commit whose partition is revoked while the library retries it reads "not owned" on the retry', async () => {
    const log = fakeLog({ partitions: { 't/0': 3 } });
    let ownedOnRetry: boolean | undefined;
    const f = new PartitionFetcher({
      ...log.deps,
      commit: async (_t, _p, _next, owned) => {
        // The library's rejoin-and-retry: the assignment changes between its two reads.
        f.setAssignment({});
        ownedOnRetry = owned();
      },
    });
    let rejected = false;
    f.start(1, async (b) => {
      await b.commit('1', null).catch(() => {
        rejected = true;
      });
    });
    f.setAssignment({ t: [0] });
    await until(() => ownedOnRetry !== undefined);
    await f.stop();
    expect(ownedOnRetry).toBe(false);
    expect(rejected).toBe(false); // the client glue turns an empty send into a rejection
  });

  it('a partition given back after a revocation starts again from its committed offset, not the old position', async () => {
    const committed: Record<string, bigint> = { 't/0': 0n };
    const log = fakeLog({ partitions: { 't/0': 12 }, committed });
    const f = new PartitionFetcher(log.deps);
    const firsts: string[] = [];
    f.start(1, async (b) => {
      firsts.push(b.messages[0]!.offset);
      b.resolveOffset(b.lastOffset());
    });
    f.setAssignment({ t: [0] });
    await until(() => firsts.length >= 1);
    f.setAssignment({});
    committed['t/0'] = 9n;
    f.setAssignment({ t: [0] });
    await until(() => firsts.includes('9'));
    await f.stop();
    expect(firsts).toContain('9');
  });

  it('a partition kept across a new assignment is never fetched below the committed offset another member reached meanwhile', async () => {
    // The member kept t/0 from one assignment to the next but missed the generation in between
    // (its SyncGroup failed and was retried), in which another member owned t/0 and committed 40.
    const committed: Record<string, bigint> = { 't/0': 0n };
    const log = fakeLog({ partitions: { 't/0': 60, 't/1': 60 }, committed, perFetch: 4 });
    const f = new PartitionFetcher(log.deps);
    const firsts: bigint[] = [];
    let hold = true;
    f.start(1, async (b) => {
      if (b.partition === 0) firsts.push(BigInt(b.messages[0]!.offset));
      b.resolveOffset(b.lastOffset());
      await b.commit((BigInt(b.lastOffset()) + 1n).toString(), null);
      while (hold) await new Promise((r) => setTimeout(r, 2));
    });
    f.setAssignment({ t: [0] });
    await until(() => firsts.length === 1);
    committed['t/0'] = 40n;
    f.setAssignment({ t: [0, 1] });
    hold = false;
    await until(
      () => firsts.some((o) => o >= 40n) && log.fetches.some((x) => x.parts.some((p) => p.partition === 1)),
    );
    await f.stop();
    const fetched = log.fetches.flatMap((x) => x.parts).filter((p) => p.partition === 0);
    // The first fetch read from 0; every one after the new assignment from 40 on, never from 4.
    expect(fetched[0]!.offset).toBe(0n);
    expect(fetched.slice(1).every((p) => p.offset >= 40n)).toBe(true);
    expect(firsts.filter((o) => o > 0n && o < 40n)).toEqual([]);
  });

  it('a kept partition whose last commit was refused as its generation ended is read again from its committed offset, and committed to the end', async () => {
    // The batch's messages were resolved (processed), then its commit was refused: the generation
    // had ended. The member keeps the partition in the next one. Going on from its position would
    // never commit 0..3 again (no newer message comes): the group would stay 4 behind for good.
    const committed: Record<string, bigint> = { 't/0': 0n };
    const log = fakeLog({ partitions: { 't/0': 4 }, committed, perFetch: 4 });
    let refuse = true;
    const f = new PartitionFetcher({
      ...log.deps,
      commit: async (t, p, next, owned) => {
        if (refuse) throw new PartitionRevokedError(t, p);
        await log.deps.commit(t, p, next, owned);
        committed[`${t}/${p}`] = next;
      },
    });
    const firsts: bigint[] = [];
    f.start(1, async (b) => {
      firsts.push(BigInt(b.messages[0]!.offset));
      b.resolveOffset(b.lastOffset());
      await b.commit((BigInt(b.lastOffset()) + 1n).toString(), null);
    });
    f.setAssignment({ t: [0] });
    await until(() => firsts.length === 1);
    // Long polls at the end of the log, nothing committed: the stall.
    await new Promise((r) => setTimeout(r, 30));
    expect(firsts).toEqual([0n]);
    refuse = false;
    f.setAssignment({ t: [0] });
    await until(() => committed['t/0'] === 4n);
    await f.stop();
    expect(firsts).toEqual([0n, 0n]);
    expect(log.commits).toEqual([{ key: 't/0', next: 4n, sent: true }]);
  });

  it('a kept partition whose position is past its committed offset keeps its position', async () => {
    const committed: Record<string, bigint> = {};
    const log = fakeLog({ partitions: { 't/0': 20 }, committed, perFetch: 4 });
    const f = new PartitionFetcher(log.deps);
    const firsts: bigint[] = [];
    f.start(1, async (b) => {
      firsts.push(BigInt(b.messages[0]!.offset));
      b.resolveOffset(b.lastOffset());
    });
    f.setAssignment({ t: [0] });
    await until(() => firsts.length >= 2);
    // Nothing committed (this fake's commit is never called): no offset to move to, none below.
    f.setAssignment({ t: [0] });
    await until(() => firsts.includes(16n));
    await f.stop();
    expect(firsts).toEqual([0n, 4n, 8n, 12n, 16n]);
  });

  it('a fetch that never settles is abandoned after fetchTimeoutMs: the broker is fetched again, its late answer dropped', async () => {
    const log = fakeLog({ partitions: { 't/0': 8 }, perFetch: 4 });
    let lost: ((parts: FetchedPart[]) => void) | undefined;
    const fetch = log.deps.fetch;
    const errors: string[] = [];
    const f = new PartitionFetcher({
      ...log.deps,
      fetchTimeoutMs: 20,
      onError: (where, err) => errors.push(`${where}: ${(err as Error).message}`),
      // The first fetch's promise is kept pending (a response lost with its connection).
      fetch: (node, parts) =>
        lost === undefined && errors.length === 0
          ? new Promise((resolve) => {
              lost = resolve;
            })
          : fetch(node, parts),
    });
    const firsts: string[] = [];
    f.start(1, async (b) => {
      firsts.push(b.messages[0]!.offset);
      b.resolveOffset(b.lastOffset());
    });
    f.setAssignment({ t: [0] });
    await until(() => firsts.includes('4'));
    // The abandoned fetch answers at last, with offset 0 again: nothing is delivered twice.
    lost!([
      { topic: 't', partition: 0, messages: [{ offset: '0', key: null, value: null, timestamp: '0' }] },
    ]);
    await new Promise((r) => setTimeout(r, 20));
    await f.stop();
    expect(errors).toEqual(['fetch: a fetch from broker 0 did not settle in 20 ms']);
    expect(firsts).toEqual(['0', '4']);
  });

  it('a leader or position lookup that never settles is abandoned after fetchTimeoutMs and made again', async () => {
    const log = fakeLog({ partitions: { 't/0': 8, 't/1': 8 }, perFetch: 8 });
    const errors: string[] = [];
    const hung = new Set<string>();
    const hangOnce = <T>(key: string, call: () => Promise<T>): Promise<T> => {
      if (hung.has(key)) return call();
      hung.add(key);
      return new Promise<T>(() => {});
    };
    const f = new PartitionFetcher({
      ...log.deps,
      fetchTimeoutMs: 20,
      onError: (where, err) => errors.push(`${where}: ${(err as Error).message}`),
      position: (t, p) =>
        p === 0 ? hangOnce('position', () => log.deps.position(t, p)) : log.deps.position(t, p),
      nodeOf: (t, p) => (p === 1 ? hangOnce('nodeOf', () => log.deps.nodeOf(t, p)) : log.deps.nodeOf(t, p)),
    });
    const firsts: string[] = [];
    f.start(2, async (b) => {
      firsts.push(`${b.partition}@${b.messages[0]!.offset}`);
      b.resolveOffset(b.lastOffset());
    });
    f.setAssignment({ t: [0, 1] });
    await until(() => firsts.length === 2);
    await f.stop();
    expect(firsts.sort()).toEqual(['0@0', '1@0']);
    expect(errors.sort()).toEqual([
      'metadata: a leader lookup did not settle in 20 ms',
      'position: a position lookup did not settle in 20 ms',
    ]);
  });

  it('stop() waits for the running eachBatch calls and starts no new one', async () => {
    const log = fakeLog({ partitions: { 't/0': 100 } });
    const f = new PartitionFetcher(log.deps);
    let running = 0;
    let finished = 0;
    let startedAfterStop = 0;
    let stopped = false;
    f.start(1, async (b) => {
      if (stopped) startedAfterStop += 1;
      running += 1;
      await new Promise((r) => setTimeout(r, 20));
      expect(b.isRunning()).toBe(!stopped);
      b.resolveOffset(b.lastOffset());
      running -= 1;
      finished += 1;
    });
    f.setAssignment({ t: [0] });
    await until(() => running === 1);
    stopped = true;
    await f.stop();
    expect(running).toBe(0);
    expect(finished).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 30));
    expect(startedAfterStop).toBe(0);
  });
});
