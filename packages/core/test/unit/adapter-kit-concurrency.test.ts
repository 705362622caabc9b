import { describe, expect, it } from 'vitest';
import { jsonHandler, KeyedSerializer, Limiter } from '../../src/adapter/index.js';
import type { Envelope } from '../../src/envelope.js';
import { PermanentError } from '../../src/errors.js';
import type { HandlerContext } from '../../src/handler.js';

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('Limiter', () => {
  it('admits at most `size` holders, in arrival order, and a release is idempotent', async () => {
    const limiter = new Limiter(2);
    const a = await limiter.acquire();
    const b = await limiter.acquire();
    const order: string[] = [];
    const take = (name: string) =>
      limiter.acquire().then((release) => {
        order.push(name);
        return release;
      });
    const c = take('c');
    const d = take('d');
    await tick();
    expect(limiter.active).toBe(2);
    expect(order).toEqual([]);
    a();
    a();
    await tick();
    expect(order).toEqual(['c']);
    b();
    await tick();
    expect(order).toEqual(['c', 'd']);
    (await c)();
    (await d)();
    expect(limiter.active).toBe(0);
  });
});

describe('KeyedSerializer', () => {
  it('runs one task at a time per key, keys in parallel, and a multi-key task after each key', async () => {
    const s = new KeyedSerializer();
    const log: string[] = [];
    const gates = new Map<string, () => void>();
    const task = (name: string) => () =>
      new Promise<string>((resolve) => {
        log.push(`start ${name}`);
        gates.set(name, () => {
          log.push(`end ${name}`);
          resolve(name);
        });
      });
    const a1 = s.run(['a'], task('a1'));
    const b1 = s.run(['b'], task('b1'));
    const a2 = s.run(['a'], task('a2'));
    const ab = s.run(['a', 'b'], task('ab'));
    await tick();
    expect(log).toEqual(['start a1', 'start b1']);
    gates.get('a1')!();
    await a1;
    await tick();
    expect(log).toContain('start a2');
    expect(log).not.toContain('start ab');
    gates.get('b1')!();
    gates.get('a2')!();
    await Promise.all([b1, a2]);
    await tick();
    expect(log[log.length - 1]).toBe('start ab');
    gates.get('ab')!();
    expect(await ab).toBe('ab');
    expect(s.size).toBe(0);
  });

  it('keeps a key going after a task of it throws', async () => {
    const s = new KeyedSerializer();
    await expect(s.run(['a'], async () => Promise.reject(new Error('x')))).rejects.toThrow('x');
    expect(await s.run(['a'], async () => 1)).toBe(1);
    expect(s.size).toBe(0);
  });
});

describe('jsonHandler', () => {
  const envelope = (body: string) => ({ body: Buffer.from(body) }) as Envelope;
  const ctx = {} as HandlerContext;

  it('parses the body, validates it, and makes bad input permanent', async () => {
    const h = jsonHandler(
      (v: { n: number }) => v.n * 2,
      (v) => {
        if (typeof (v as { n?: unknown }).n !== 'number') throw new Error('n must be a number');
        return v as { n: number };
      },
    );
    expect(await h(envelope('{"n":21}'), ctx)).toBe(42);
    expect(() => h(envelope('{nope'), ctx)).toThrow(PermanentError);
    expect(() => h(envelope('{nope'), ctx)).toThrow(/not valid JSON/);
    expect(() => h(envelope('{"n":"x"}'), ctx)).toThrow(/failed validation: n must be a number/);
  });
});
