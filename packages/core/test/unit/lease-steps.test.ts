import { describe, expect, it } from 'vitest';
import { idempotencyKey, OnceError, PermanentError } from '../../src/index.js';
import { LeaseErrorCode } from '../../src/lease/lease-errors.js';
import { type StepStore, Steps } from '../../src/lease/steps.js';
import { checkStepKey, MAX_STEP_KEY_BYTES } from '../../src/message/idempotency-key.js';

/** A store that keeps records in memory: our own interface, faked. */
function memoryStore(opts: { lostAfter?: number } = {}) {
  const records: { step: string; seq: number; json: string | null }[] = [];
  let renewals = 0;
  const store: StepStore = {
    async renew() {
      renewals++;
    },
    async record(step, seq, json) {
      if (opts.lostAfter !== undefined && records.length >= opts.lostAfter) {
        throw new OnceError(LeaseErrorCode.LeaseLost, 'lost', { retryable: true });
      }
      records.push({ step, seq, json });
    },
  };
  return { store, records, renewals: () => renewals };
}

function steps(store: StepStore, recorded: Map<string, unknown> = new Map()) {
  return new Steps({
    store,
    recorded,
    consumer: 'c',
    id: 'm1',
    signal: new AbortController().signal,
  });
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (OnceError.is(err)) return err.code;
    throw err;
  }
  throw new Error('did not throw');
}

describe('ctx.step', () => {
  it('runs a new step, records its JSON before returning, and hands fn the idempotency key', async () => {
    const m = memoryStore();
    const s = steps(m.store);
    let key = '';
    const r = await s.step('charge', ({ idempotencyKey: k }) => {
      key = k;
      return { chargeId: 'ch_1', at: new Date(0) };
    });
    // What a later attempt reads back is what this attempt sees: the JSON form.
    expect(r).toEqual({ chargeId: 'ch_1', at: '1970-01-01T00:00:00.000Z' });
    expect(m.records).toEqual([
      { step: 'charge', seq: 1, json: '{"chargeId":"ch_1","at":"1970-01-01T00:00:00.000Z"}' },
    ]);
    expect(key).toBe(idempotencyKey('c', 'm1', 'charge'));
    expect(m.renewals()).toBe(1);
  });

  it('returns a recorded result without calling fn; undefined and null stay apart', async () => {
    const m = memoryStore();
    const s = steps(
      m.store,
      new Map<string, unknown>([
        ['a', { n: 1 }],
        ['b', undefined],
        ['c', null],
      ]),
    );
    let calls = 0;
    const fn = () => {
      calls++;
      return 'fresh';
    };
    expect(await s.step('a', fn)).toEqual({ n: 1 });
    expect(await s.step('b', fn)).toBeUndefined();
    expect(await s.step('c', fn)).toBeNull();
    expect(await s.step('d', fn)).toBe('fresh');
    expect(calls).toBe(1);
    expect(m.records.map((r) => [r.step, r.seq])).toEqual([['d', 4]]);
  });

  it('records undefined as SQL NULL', async () => {
    const m = memoryStore();
    expect(await steps(m.store).step('mail', () => undefined)).toBeUndefined();
    expect(m.records[0]!.json).toBeNull();
  });

  it('refuses a step name reused in one run, even when the first one is recorded', async () => {
    const s = steps(memoryStore().store, new Map([['a', 1]]));
    await s.step('a', () => 1);
    expect(await codeOf(s.step('a', () => 2))).toBe('STEP_NAME_REUSED');
    await s.step('b', () => 1);
    expect(await codeOf(s.step('b', () => 2))).toBe('STEP_NAME_REUSED');
  });

  it('refuses steps run concurrently', async () => {
    const s = steps(memoryStore().store);
    let release!: () => void;
    const first = s.step('a', () => new Promise<number>((r) => (release = () => r(1))));
    await new Promise((r) => setTimeout(r, 0));
    expect(await codeOf(s.step('b', () => 2))).toBe('STEPS_CONCURRENT');
    release();
    expect(await first).toBe(1);
    expect(await s.step('b', () => 2)).toBe(2);
  });

  it.each([
    ['a BigInt', (): unknown => 10n],
    [
      'a cycle',
      () => {
        const o: Record<string, unknown> = {};
        o.self = o;
        return o;
      },
    ],
    ['a function', () => () => 1],
    ['a symbol', () => Symbol('x')],
  ])('refuses %s as a result, recording nothing', async (_, fn) => {
    const m = memoryStore();
    expect(await codeOf(steps(m.store).step('x', fn))).toBe('STEP_RESULT_NOT_SERIALIZABLE');
    expect(m.records).toEqual([]);
  });

  it.each([[''], ['x'.repeat(201)], [42]])('refuses the step name %j', async (name) => {
    expect(await codeOf(steps(memoryStore().store).step(name as string, () => 1))).toBe('INVALID_STEP_NAME');
  });

  it('does not record a step whose fn throws, and lets the same name run again next attempt', async () => {
    const m = memoryStore();
    const s = steps(m.store);
    await expect(s.step('a', () => Promise.reject(new Error('card declined')))).rejects.toThrow(
      'card declined',
    );
    expect(m.records).toEqual([]);
  });

  it('passes LEASE_LOST from the store through, and refuses steps after close', async () => {
    const m = memoryStore({ lostAfter: 0 });
    const s = steps(m.store);
    expect(await codeOf(s.step('a', () => 1))).toBe('LEASE_LOST');
    s.close(new OnceError('STEP_AFTER_SETTLE', 'settled'));
    expect(await codeOf(s.step('b', () => 1))).toBe('STEP_AFTER_SETTLE');
  });
});

describe('the step key bound', () => {
  it('refuses a key past MAX_STEP_KEY_BYTES in UTF-8 before renewing or calling fn; ASCII at the character limits fits', async () => {
    const { store, renewals } = memoryStore();
    const wide = (n: number) => '語'.repeat(n); // three bytes of UTF-8 per code unit
    const s = new Steps({
      store,
      recorded: new Map(),
      consumer: wide(200),
      id: wide(512),
      signal: new AbortController().signal,
    });
    let called = false;
    const err = await s.step(wide(200), () => (called = true)).catch((e: unknown) => e);
    expect(PermanentError.is(err)).toBe(true);
    expect((err as Error).message).toContain(`2736 bytes`);
    expect((err as Error).message).toContain(`at most ${MAX_STEP_KEY_BYTES}`);
    expect(called).toBe(false);
    expect(renewals()).toBe(0);
    expect(() => checkStepKey('c'.repeat(200), 'i'.repeat(512), 's'.repeat(200))).not.toThrow();
  });
});

describe('idempotencyKey', () => {
  it('is a v5 UUID, stable, and distinct per consumer, id and step', () => {
    const k = idempotencyKey('billing', 'order-1', 'charge');
    expect(k).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(idempotencyKey('billing', 'order-1', 'charge')).toBe(k);
    const others = [
      idempotencyKey('billing2', 'order-1', 'charge'),
      idempotencyKey('billing', 'order-2', 'charge'),
      idempotencyKey('billing', 'order-1', 'mail'),
      // parts cannot bleed into each other
      idempotencyKey('billing', 'order-1c', 'harge'),
      idempotencyKey('billing', 'order-', '1charge'),
    ];
    expect(new Set([k, ...others]).size).toBe(6);
  });

  it('refuses a bad step name', () => {
    expect(() => idempotencyKey('c', 'i', '')).toThrow(/step name/);
  });
});
