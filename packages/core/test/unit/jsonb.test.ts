import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fromJsonb, isJsonbSafeString, toJsonb } from '../../src/sql/jsonb.js';

// What PostgreSQL's jsonb input refuses: a \u0000 escape, or a surrogate escape not in a pair.
function jsonbWouldRefuse(text: string): boolean {
  return /\\u0000/.test(text.replace(/\\\\/g, '')) || /\\ud[89a-f]/i.test(text.replace(/\\\\/g, ''));
}

describe('jsonb storage boundary', () => {
  it('stores plain values unchanged', () => {
    const v = { a: 'x', b: [1, 'ü', '😀'], c: null, d: { e: true } };
    expect(toJsonb(v)).toBe(JSON.stringify(v));
    expect(fromJsonb(JSON.parse(toJsonb(v)!))).toEqual(v);
  });

  it('round-trips NUL, lone surrogates, bad keys and user objects with a $once key', () => {
    const v = {
      message: 'Unexpected token \u0000 in JSON',
      lone: ['order-\ud800', 'order-\udbff', '\udc00x'],
      'key\u0000': 'v',
      nested: { $once: 'str', u16: 'not a tag' },
    };
    const text = toJsonb(v)!;
    expect(jsonbWouldRefuse(text)).toBe(false);
    const back = fromJsonb<typeof v>(JSON.parse(text));
    expect(back).toEqual(v);
    expect(back.lone[0]).not.toBe(back.lone[1]);
  });

  it('gives null for what JSON cannot express', () => {
    expect(toJsonb(undefined)).toBeNull();
    expect(toJsonb(() => 1)).toBeNull();
  });

  it('tells safe strings from unsafe ones', () => {
    expect(isJsonbSafeString('😀')).toBe(true);
    expect(isJsonbSafeString('\ud83d')).toBe(false);
    expect(isJsonbSafeString('\ude00')).toBe(false);
    expect(isJsonbSafeString('a\u0000')).toBe(false);
  });

  it('round-trips any JSON value, and never writes what jsonb refuses (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary' }), (v) => {
        const text = toJsonb(v);
        if (text === null) return;
        expect(jsonbWouldRefuse(text)).toBe(false);
        expect(fromJsonb(JSON.parse(text))).toEqual(JSON.parse(JSON.stringify(v)));
      }),
      { numRuns: 500 },
    );
    // 500 generated documents take about 1 s alone; a loaded 2-core machine has needed over 5 s.
  }, 60_000);
});
