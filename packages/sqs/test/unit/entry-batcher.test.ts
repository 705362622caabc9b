import { describe, expect, it } from 'vitest';
import { EntryBatcher } from '../../src/entry-batcher.js';

describe('EntryBatcher', () => {
  it('groups adds into calls of at most ten and reports each entry', async () => {
    const calls: string[][] = [];
    const b = new EntryBatcher<{ R: string }>(async (entries) => {
      calls.push(entries.map((e) => e.R));
      return {
        Successful: entries.filter((e) => e.R !== 'bad' && e.R !== 'lost').map((e) => ({ Id: e.Id })),
        Failed: entries
          .filter((e) => e.R === 'bad')
          .map((e) => ({ Id: e.Id, Code: 'ReceiptHandleIsInvalid', Message: 'no' })),
      };
    });
    const names = [...Array.from({ length: 11 }, (_, i) => `r${i}`), 'bad', 'lost'];
    const results = await Promise.all(names.map((R) => b.add({ R })));
    expect(calls.map((c) => c.length)).toEqual([10, 3]);
    expect(results.slice(0, 11).every((r) => r.ok)).toBe(true);
    expect(results[11]).toEqual({ ok: false, code: 'ReceiptHandleIsInvalid', message: 'no' });
    expect(results[12]).toMatchObject({ ok: false, code: 'Missing' });
    await b.drain();
  });

  it('retries a call that failed as a whole, then gives every entry the error', async () => {
    let n = 0;
    const b = new EntryBatcher<{ R: string }>(
      async (entries) => {
        n++;
        if (n < 3) throw Object.assign(new Error('socket hang up'), { name: 'TimeoutError' });
        return { Successful: entries.map((e) => ({ Id: e.Id })) };
      },
      { attempts: 3, retryDelayMs: 1 },
    );
    expect(await b.add({ R: 'a' })).toEqual({ ok: true });
    const never = new EntryBatcher<{ R: string }>(
      async () => {
        throw Object.assign(new Error('down'), { name: 'NetworkingError' });
      },
      { attempts: 2, retryDelayMs: 1 },
    );
    expect(await never.add({ R: 'a' })).toEqual({ ok: false, code: 'NetworkingError', message: 'down' });
  });

  it('queue() hands each entry its own result with its context, and drain() waits for it', async () => {
    const b = new EntryBatcher<{ R: string }>(async (entries) => {
      await new Promise((r) => setTimeout(r, 20));
      return {
        Successful: entries.filter((e) => e.R !== 'bad').map((e) => ({ Id: e.Id })),
        Failed: entries.filter((e) => e.R === 'bad').map((e) => ({ Id: e.Id, Code: 'X', Message: 'no' })),
      };
    });
    const seen: [string, boolean][] = [];
    const done = (r: { ok: boolean }, who: string) => seen.push([who, r.ok]);
    for (const R of ['a', 'bad', 'c']) b.queue({ R }, done, `ctx-${R}`);
    await b.drain();
    expect(seen).toEqual([
      ['ctx-a', true],
      ['ctx-bad', false],
      ['ctx-c', true],
    ]);
  });

  it('drain() waits for calls in flight', async () => {
    let done = false;
    const b = new EntryBatcher<{ R: string }>(async (entries) => {
      await new Promise((r) => setTimeout(r, 20));
      done = true;
      return { Successful: entries.map((e) => ({ Id: e.Id })) };
    });
    void b.add({ R: 'a' });
    await b.drain();
    expect(done).toBe(true);
  });
});
