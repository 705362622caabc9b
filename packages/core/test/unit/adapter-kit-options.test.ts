import { describe, expect, it } from 'vitest';
import {
  type AdapterOptionKey,
  optionCheck,
  type ResolvedOptions,
  splitOptions,
  withDefaults,
} from '../../src/adapter/index.js';
import { OnceError } from '../../src/errors.js';
import { nearest } from '../../src/nearest.js';

const spec = {
  factory: 'createTestConsumer',
  adapterKeys: ['queue', 'batch', 'batchSize'] as const,
  required: ['queue'],
};
const base = { pool: {}, handler: () => undefined, queue: 'q' };
interface TestOptions {
  pool: unknown;
  handler: unknown;
  queue?: string;
  batch?: boolean;
  batchSize?: number;
  maxAttempts?: number;
  consumer?: string;
}
const split = (o: object) => splitOptions(o as TestOptions, spec);

function codeAndMessage(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    expect(OnceError.is(err)).toBe(true);
    return { code: (err as OnceError).code, message: (err as Error).message };
  }
  throw new Error('did not throw');
}

describe('nearest', () => {
  it('finds a typo, a swap and a case slip, and stays quiet for a stranger', () => {
    const known = ['maxAttempts', 'batch', 'batchSize', 'concurrency', 'deadLetterTopic'];
    expect(nearest('maxAttemps', known)).toBe('maxAttempts');
    expect(nearest('bacth', known)).toBe('batch');
    expect(nearest('BatchSize', known)).toBe('batchSize');
    expect(nearest('concurency', known)).toBe('concurrency');
    expect(nearest('zzzzzzzz', known)).toBeUndefined();
  });
});

describe('splitOptions', () => {
  it("splits the inbox's keys from the adapter's", () => {
    const { inbox, adapter } = split({ ...base, batch: true, maxAttempts: 3, consumer: 'c' });
    expect(adapter).toEqual({ queue: 'q', batch: true });
    expect(Object.keys(inbox).sort()).toEqual(['consumer', 'handler', 'maxAttempts', 'pool']);
  });

  it('rejects an unknown key with INVALID_OPTION, naming it and the nearest known one', () => {
    const e = codeAndMessage(() => split({ ...base, maxAttemps: 3 }));
    expect(e.code).toBe('INVALID_OPTION');
    expect(e.message).toContain("createTestConsumer: option 'maxAttemps' is unknown");
    expect(e.message).toContain("did you mean 'maxAttempts'?");
    const adapterTypo = codeAndMessage(() => split({ ...base, batchsize: 3 }));
    expect(adapterTypo.message).toContain("did you mean 'batchSize'?");
    // An unknown key is refused even when undefined: it is still a typo.
    const undef = codeAndMessage(() => split({ ...base, bogusOptionName: undefined }));
    expect(undef.message).toContain("option 'bogusOptionName' is unknown");
    expect(undef.message).not.toContain('did you mean');
  });

  it('rejects a missing required key, pool and handler included', () => {
    for (const key of ['handler', 'pool', 'queue']) {
      const o: Record<string, unknown> = { ...base };
      delete o[key];
      const e = codeAndMessage(() => split(o));
      expect(e.code).toBe('INVALID_OPTION');
      expect(e.message).toBe(`createTestConsumer: option '${key}' is required`);
    }
  });

  it('does not require pool when databases is given: both go to the inbox, which checks the pair', () => {
    const { pool: _pool, ...rest } = base;
    const route = () => 'a';
    const { inbox } = split({ ...rest, databases: { a: {} }, route });
    expect(inbox).toEqual({ handler: base.handler, databases: { a: {} }, route });
    expect(codeAndMessage(() => split({ ...rest, route })).message).toBe(
      "createTestConsumer: option 'pool' is required",
    );
  });

  it('takes the adapter keys as a key set as well as a list', () => {
    const keySet = {
      queue: true,
      batch: true,
      batchSize: true,
    } as const satisfies Record<AdapterOptionKey<TestOptions>, true>;
    // The compiler refuses a key set that misses an option or names one the interface lacks.
    // @ts-expect-error: batchSize is missing
    const missing = { queue: true, batch: true } as const satisfies Record<
      AdapterOptionKey<TestOptions>,
      true
    >;
    const extra = {
      queue: true,
      batch: true,
      batchSize: true,
      // @ts-expect-error: not an option of TestOptions
      prefetch: true,
    } as const satisfies Record<AdapterOptionKey<TestOptions>, true>;
    expect(Object.keys(missing)).toEqual(['queue', 'batch']);
    expect(Object.keys(extra)).toHaveLength(4);
    const bySet = (o: object) => splitOptions(o as TestOptions, { ...spec, adapterKeys: keySet });
    const { inbox, adapter } = bySet({ ...base, batch: true, maxAttempts: 3 });
    expect(adapter).toEqual({ queue: 'q', batch: true });
    expect(inbox).toEqual({ pool: {}, handler: base.handler, maxAttempts: 3 });
    expect(codeAndMessage(() => bySet({ ...base, batchsize: 3 })).message).toBe(
      codeAndMessage(() => split({ ...base, batchsize: 3 })).message,
    );
  });

  it('rejects what is not an object', () => {
    expect(codeAndMessage(() => split(null as unknown as object)).code).toBe('INVALID_OPTION');
  });
});

describe('validators', () => {
  it('name the field and say what was wrong', () => {
    expect(optionCheck.integer('batchSize', 5)).toBe(5);
    expect(codeAndMessage(() => optionCheck.integer('batchSize', 0)).message).toBe(
      "option 'batchSize' must be at least 1, got 0",
    );
    expect(codeAndMessage(() => optionCheck.integer('batchSize', 1.5)).message).toContain(
      'must be an integer',
    );
    expect(codeAndMessage(() => optionCheck.integer('prefetch', 70_000, 1, 65_535)).message).toContain(
      'at most 65535',
    );
    expect(optionCheck.durationMs('stopTimeoutMs', 0)).toBe(0);
    expect(codeAndMessage(() => optionCheck.durationMs('stopTimeoutMs', -1)).message).toContain(
      'at least 0 ms',
    );
    expect(codeAndMessage(() => optionCheck.durationMs('stopTimeoutMs', '5s')).message).toContain(
      'milliseconds',
    );
    expect(optionCheck.name('queue', 'q')).toBe('q');
    expect(codeAndMessage(() => optionCheck.name('queue', '')).message).toContain(
      "option 'queue' must be a non-empty string",
    );
    expect(codeAndMessage(() => optionCheck.name('queue', 'x'.repeat(256))).message).toContain('at most 255');
    expect(optionCheck.oneOf('idFrom', 'header', ['header', 'offset'])).toBe('header');
    expect(codeAndMessage(() => optionCheck.oneOf('idFrom', 'x', ['header', 'offset'])).message).toBe(
      "option 'idFrom' must be one of 'header', 'offset', got \"x\"",
    );
  });
});

describe('checkConsumerName', () => {
  it('checks a given name and otherwise takes the fallback, calling a function fallback only then', () => {
    expect(optionCheck.consumerName('payments', 'queue')).toBe('payments');
    expect(optionCheck.consumerName(undefined, 'queue')).toBe('queue');
    expect(optionCheck.consumerName(undefined, () => 'lazy')).toBe('lazy');
    const refuse = () => {
      throw new Error('the fallback ran');
    };
    expect(optionCheck.consumerName('payments', refuse)).toBe('payments');
    expect(codeAndMessage(() => optionCheck.consumerName('', 'queue')).message).toContain(
      "option 'consumer' must be a non-empty string",
    );
  });
});

describe('ResolvedOptions', () => {
  it('makes the chosen fields present, read-only and never undefined', () => {
    // Frozen, as every adapter returns its resolved options.
    const resolved: ResolvedOptions<TestOptions, 'queue' | 'batch'> = Object.freeze({
      queue: 'q',
      batch: false,
    });
    // @ts-expect-error: a resolved field is never undefined
    const missing: ResolvedOptions<TestOptions, 'queue'> = { queue: undefined };
    expect(() => {
      // @ts-expect-error: a resolved field is read-only
      resolved.batch = true;
    }).toThrow(TypeError);
    expect(resolved).toEqual({ queue: 'q', batch: false });
    expect(missing.queue).toBeUndefined();
  });
});

describe('withDefaults', () => {
  it('lays the given options over the defaults; a key given as undefined keeps its default', () => {
    const defaults = { a: 1, b: 'x', c: true };
    expect(withDefaults(defaults, { a: 5, b: undefined })).toEqual({ a: 5, b: 'x', c: true });
    expect(defaults).toEqual({ a: 1, b: 'x', c: true });
  });
});
