import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
// @ts-expect-error plain JavaScript module of the benches, without declarations
import { doneCount, timeConsumer } from '../../bench/support/measure.mjs';

// The benches' wait for a run's messages (bench/support/measure.mjs): it ends when all are done,
// and fails, naming the run, when none is done for the stall time, instead of waiting forever.
// Fake timers (performance.now included), so nothing here depends on the machine's speed.

type Count = { finished: Promise<void>; done: number; add(k?: number): void };

/** Settles-so-far of a promise, read after the fake clock moved. */
function watch(p: Promise<unknown>) {
  const state: { settled: 'no' | 'resolved' | 'rejected'; error?: Error } = { settled: 'no' };
  p.then(
    () => {
      state.settled = 'resolved';
    },
    (err: Error) => {
      state.settled = 'rejected';
      state.error = err;
    },
  );
  return state;
}

describe('bench stall guard (doneCount)', () => {
  beforeEach(() => {
    vi.useFakeTimers({
      toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout', 'performance'],
    });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('resolves once the total is done', async () => {
    const count: Count = doneCount({ total: 5, label: 'x', stallMs: 1_000 });
    const state = watch(count.finished);
    count.add(3);
    await vi.advanceTimersByTimeAsync(10);
    expect(state.settled).toBe('no');
    count.add(3);
    await vi.advanceTimersByTimeAsync(10);
    expect(state.settled).toBe('resolved');
    expect(count.done).toBe(6);
    // Resolved runs leave no timer behind to fire later.
    await vi.advanceTimersByTimeAsync(5_000);
    expect(state.settled).toBe('resolved');
  });

  it('fails after the stall time without progress, naming the run and how many were done', async () => {
    const label = 'kafka B1/msg (faults stream, repetition 2 of 7)';
    const count: Count = doneCount({ total: 21_000, label, stallMs: 60_000 });
    const state = watch(count.finished);
    count.add(3_738);
    await vi.advanceTimersByTimeAsync(59_000);
    expect(state.settled).toBe('no');
    await vi.advanceTimersByTimeAsync(2_000);
    expect(state.settled).toBe('rejected');
    expect(state.error?.message).toBe(
      'kafka B1/msg (faults stream, repetition 2 of 7): no progress for 60 s, 3738 of 21000 messages done',
    );
  });

  it('counts the stall time from the last message done', async () => {
    const count: Count = doneCount({ total: 10, label: 'x', stallMs: 1_000 });
    const state = watch(count.finished);
    for (let k = 0; k < 5; k++) {
      await vi.advanceTimersByTimeAsync(900);
      count.add(1);
    }
    // 4.5 s in, more than the stall time since the start, 0 since the last message.
    expect(state.settled).toBe('no');
    // The guard looks once a second: within two seconds of the last message it has failed.
    await vi.advanceTimersByTimeAsync(2_000);
    expect(state.settled).toBe('rejected');
    expect(state.error?.message).toMatch(/5 of 10 messages done/);
  });

  it("fails the broker benches' timeConsumer when its consumer stops calling onDone", async () => {
    const stop = vi.fn(async () => {});
    const run = timeConsumer({
      name: 'B1/msg',
      label: 'B1/msg (faults stream, repetition 1 of 7)',
      n: 100,
      counter: { trips: 0 },
      consume: async (onDone: () => void) => {
        for (let k = 0; k < 40; k++) onDone();
        return stop;
      },
    });
    const state = watch(run);
    await vi.advanceTimersByTimeAsync(61_000);
    expect(state.settled).toBe('rejected');
    expect(state.error?.message).toBe(
      'B1/msg (faults stream, repetition 1 of 7): no progress for 60 s, 40 of 100 messages done',
    );
  });
});
