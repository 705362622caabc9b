import { describe, expect, it } from 'vitest';
import { pullSize, pullWindow } from '../../src/pull-window.js';

describe('pullWindow / pullSize', () => {
  it('without batch: batchSize × concurrency held, a pull once half of it is free', () => {
    const o = { batch: false, batchSize: 25, concurrency: 8 };
    expect(pullWindow(o)).toEqual({ capacity: 200, least: 100 });
    expect(pullSize(o, 0)).toBe(200);
    expect(pullSize(o, 100)).toBe(100);
    expect(pullSize(o, 101)).toBe(0);
    expect(pullSize({ batch: false, batchSize: 1, concurrency: 1 }, 0)).toBe(1);
    expect(pullSize({ batch: false, batchSize: 1, concurrency: 1 }, 1)).toBe(0);
  });

  it('with batch: one batch more than runs at once, a pull as soon as a whole batch fits', () => {
    const one = { batch: true, batchSize: 100, concurrency: 1 };
    expect(pullWindow(one)).toEqual({ capacity: 200, least: 100 });
    // Empty: the batch to run and the one behind it.
    expect(pullSize(one, 0)).toBe(200);
    // A batch runs: the next one is pulled while it does.
    expect(pullSize(one, 100)).toBe(100);
    // A batch runs and one waits: nothing more until one settles.
    expect(pullSize(one, 200)).toBe(0);
    expect(pullSize(one, 101)).toBe(0);
    const four = { batch: true, batchSize: 50, concurrency: 4 };
    expect(pullWindow(four)).toEqual({ capacity: 250, least: 50 });
    expect(pullSize(four, 200)).toBe(50);
    expect(pullSize(four, 201)).toBe(0);
  });

  it('never lets more than one batch wait beyond those running', () => {
    for (const batchSize of [1, 5, 100]) {
      for (const concurrency of [1, 2, 4]) {
        const o = { batch: true, batchSize, concurrency };
        for (let held = 0; held <= batchSize * (concurrency + 1); held++) {
          expect(held + pullSize(o, held)).toBeLessThanOrEqual(batchSize * (concurrency + 1));
        }
      }
    }
  });
});
