import { describe, expect, it } from 'vitest';
import { processGroup } from '../../src/adapter/delivery-pipeline.js';
import { Gate, jsonHandler, KeyedSerializer, Limiter, takeGroup } from '../../src/adapter/index.js';
import type { ProcessOptions } from '../../src/engine/process-options.js';
import { PermanentError } from '../../src/errors.js';
import type { HandlerContext } from '../../src/handler/handler.js';
import type { Envelope } from '../../src/message/envelope.js';

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

describe('processGroup', () => {
  const env = (id: string, redelivered = false): Envelope => ({
    id,
    body: Buffer.from(id),
    headers: {},
    key: undefined,
    source: { broker: 'test', queue: 'q' },
    attempt: 1,
    redelivered,
  });
  const said = (call: ProcessOptions | undefined) =>
    call?.starts === undefined ? '' : call.starts.suspect ? ' (suspect)' : ' (counted as attempts)';
  const fakeInbox = (log: string[], fail = false) => ({
    async process(e: Envelope, call?: ProcessOptions) {
      log.push(`process ${e.id}${said(call)}`);
      if (fail) throw new Error('inbox bug');
      return { status: 'processed', id: e.id } as never;
    },
    async processBatch(es: readonly Envelope[], call?: ProcessOptions) {
      log.push(`batch ${es.map((e) => e.id).join(',')}${said(call)}`);
      return es.map((e) => ({ status: 'processed', id: e.id }) as never);
    },
  });
  const starts = { fresh: undefined, suspect: { starts: { suspect: true } } };

  it('runs one envelope through process, more through processBatch; a fresh group shared, no start counted', async () => {
    const log: string[] = [];
    const gate = new Gate();
    const other = await gate.shared(); // a shared holder does not keep a fresh group out
    expect(await processGroup({ inbox: fakeInbox(log), gate, starts }, [env('a')], false)).toHaveLength(1);
    expect(
      await processGroup({ inbox: fakeInbox(log), gate, starts }, [env('b'), env('c')], false),
    ).toHaveLength(2);
    other();
    expect(log).toEqual(['process a', 'batch b,c']);
  });

  it("hands a fresh group the budget's fresh options when the broker counts deliveries", async () => {
    const log: string[] = [];
    const both = { fresh: { starts: { suspect: false, attemptIsStarts: true } }, suspect: starts.suspect };
    await processGroup(
      { inbox: fakeInbox(log), gate: new Gate(), starts: both },
      [env('a'), env('b')],
      false,
    );
    await processGroup({ inbox: fakeInbox(log), gate: new Gate(), starts: both }, [env('c', true)], true);
    expect(log).toEqual(['batch a,b (counted as attempts)', 'process c (suspect)']);
  });

  it('runs a suspect group exclusive with the suspect options; leaves the gate when the inbox throws', async () => {
    const log: string[] = [];
    const gate = new Gate();
    const holder = await gate.shared();
    const run = processGroup({ inbox: fakeInbox(log, true), gate, starts }, [env('s', true)], true);
    await tick();
    expect(log).toEqual([]); // waits for the shared holder to leave
    holder();
    await expect(run).rejects.toThrow('inbox bug');
    expect(log).toEqual(['process s (suspect)']);
    const leave = await gate.exclusive(); // left: another exclusive holder gets in
    leave();
  });
  it('holds a limiter slot, inside the gate, while the group runs', async () => {
    const log: string[] = [];
    const limiter = new Limiter(1);
    const held = await limiter.acquire();
    const deps = { inbox: fakeInbox(log), gate: new Gate(), starts, limiter };
    const run = processGroup(deps, [env('a')], false);
    await tick();
    expect(log).toEqual([]); // waits for the slot
    held();
    await run;
    expect(log).toEqual(['process a']);
    expect(limiter.active).toBe(0); // given back
  });
});

describe('takeGroup', () => {
  const fresh = (id: string) => ({ id, redelivered: false });
  const suspect = (id: string) => ({ id, redelivered: true });
  const ids = (r: { group: { id: string }[]; suspect: boolean }) => [r.group.map((x) => x.id), r.suspect];

  it('takes a suspect alone, fresh ones up to max and never past the next suspect', () => {
    const queue = [suspect('s1'), fresh('a'), fresh('b'), fresh('c'), suspect('s2'), fresh('d')];
    const take = () => ids(takeGroup(queue, (x) => x.redelivered, 2));
    expect(take()).toEqual([['s1'], true]);
    expect(take()).toEqual([['a', 'b'], false]);
    expect(take()).toEqual([['c'], false]);
    expect(take()).toEqual([['s2'], true]);
    expect(take()).toEqual([['d'], false]);
    expect(queue).toEqual([]);
  });

  it('takes one at a time with max 1', () => {
    const queue = [fresh('a'), fresh('b')];
    expect(ids(takeGroup(queue, (x) => x.redelivered, 1))).toEqual([['a'], false]);
    expect(queue.map((x) => x.id)).toEqual(['b']);
  });
});
