import { describe, expect, it } from 'vitest';
import { KeyedSerializer } from '../../src/keyed-serializer.js';
import { Limiter } from '../../src/limiter.js';

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

describe('KeyedSerializer', () => {
  it('runs one key in order, other keys in parallel, multi-key tasks after each key', async () => {
    const s = new KeyedSerializer();
    const log: string[] = [];
    const task = (name: string, ms: number) => async () => {
      log.push(`${name}+`);
      await tick(ms);
      log.push(`${name}-`);
    };
    await Promise.all([
      s.run(['a'], task('a1', 20)),
      s.run(['b'], task('b1', 1)),
      s.run(['a'], task('a2', 1)),
      s.run(['a', 'b'], task('ab', 1)),
      s.run([], task('free', 1)),
    ]);
    expect(log.indexOf('a2+')).toBeGreaterThan(log.indexOf('a1-'));
    expect(log.indexOf('b1+')).toBeLessThan(log.indexOf('a1-'));
    expect(log.indexOf('free+')).toBeLessThan(log.indexOf('a1-'));
    expect(log.indexOf('ab+')).toBeGreaterThan(log.indexOf('a2-'));
    expect(s.size).toBe(0);
  });

  it('keeps going after a task throws', async () => {
    const s = new KeyedSerializer();
    await expect(s.run(['a'], async () => Promise.reject(new Error('x')))).rejects.toThrow('x');
    expect(await s.run(['a'], async () => 1)).toBe(1);
  });
});

describe('Limiter', () => {
  it('never lets more than size run, and hands slots on in order', async () => {
    const l = new Limiter(2);
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const release = await l.acquire();
        order.push(i);
        running++;
        peak = Math.max(peak, running);
        await tick(2);
        running--;
        release();
        release(); // a second call is ignored
      }),
    );
    expect(peak).toBe(2);
    expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    expect(l.active).toBe(0);
  });
});
