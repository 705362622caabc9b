import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, MAX_JSON_DEPTH } from '../../src/json-canonical.js';
import { canonicalNumber } from '../../src/json-number.js';

const canon = (text: string) => canonicalJson(Buffer.from(text, 'utf8'));

describe('canonicalNumber', () => {
  it.each([
    ['0', '0'],
    ['-0', '0'],
    ['0.000', '0'],
    ['0e-99999999999999999999', '0'],
    ['1', '1e0'],
    ['1.0', '1e0'],
    ['10e-1', '1e0'],
    ['100', '1e2'],
    ['-1.25', '-125e-2'],
    ['1234567890.1234567', '12345678901234567e-7'],
    ['0.001e3', '1e0'],
    ['1E+2', '1e2'],
    ['5e-0000', '5e0'],
  ])('%s → %s', (text, expected) => {
    expect(canonicalNumber(text)).toBe(expected);
  });

  it('adds to an exponent of any length exactly, carrying and borrowing across its digits', () => {
    expect(canonicalNumber('1e9999999999999999')).toBe('1e9999999999999999');
    expect(canonicalNumber('10e9999999999999999')).toBe('1e10000000000000000');
    expect(canonicalNumber('1.5e10000000000000000')).toBe('15e9999999999999999');
    expect(canonicalNumber('1.5e-9999999999999999')).toBe('15e-10000000000000000');
    expect(canonicalNumber('100e-10000000000000000')).toBe('1e-9999999999999998');
    // against BigInt, for exponents around the 15-digit boundary
    fc.assert(
      fc.property(
        fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }),
        fc.nat({ max: 40 }),
        fc.nat({ max: 40 }),
        (e, zeros, fraction) => {
          const text = `7${'0'.repeat(zeros)}${fraction > 0 ? `.${'0'.repeat(fraction - 1)}3` : ''}e${e}`;
          const digits = fraction > 0 ? `7${'0'.repeat(zeros + fraction - 1)}3` : '7';
          const exp = e + BigInt(fraction > 0 ? -fraction : zeros);
          expect(canonicalNumber(text)).toBe(`${digits}e${exp}`);
        },
      ),
      { seed: 26, numRuns: 2000 },
    );
  });

  it('stays linear on an exponent of a million digits', () => {
    const t = performance.now();
    const out = canonicalNumber(`1.5e${'9'.repeat(1_000_000)}`);
    expect(out.length).toBe(1_000_000 + 3);
    // a hang guard, not a timing: BigInt's conversion took about half a second for this
    expect(performance.now() - t).toBeLessThan(5_000);
  });
});

describe('canonicalJson', () => {
  it('writes one text for every spelling of a value', () => {
    expect(canon(' { "b" : [ 1.0 , true ] , "a" : "\\u0041" } ')).toBe('{"a":"A","b":[1e0,true]}');
    expect(canon('"x"')).toBe('"x"');
    expect(canon('null')).toBe('null');
  });

  it.each([
    ['', 'empty'],
    [' ', 'whitespace only'],
    ['{"a":1,}', 'a trailing comma'],
    ['[1,]', 'a trailing comma in an array'],
    ['01', 'a leading zero'],
    ['1.', 'a bare decimal point'],
    ['.5', 'no integer part'],
    ['+1', 'a plus sign'],
    ['NaN', 'NaN'],
    ["{'a':1}", 'single quotes'],
    ['"a\tb"', 'a raw tab in a string'],
    ['"\\x41"', 'an unknown escape'],
    ['"\\u12"', 'a short \\u escape'],
    ['{"a":1,"a":1}', 'a repeated key, even with the same value'],
    ['{"a":1,"\\u0061":2}', 'a repeated key, spelled differently'],
    ['\ufeff{}', 'a byte-order mark'],
    ['{} {}', 'two values'],
    ['[1] x', 'trailing text'],
    ['"abc', 'an unterminated string'],
    ['\u00a0 1', 'a no-break space'],
  ])('takes %j as not JSON (%s)', (text) => {
    expect(canon(text)).toBeUndefined();
  });

  it('takes invalid UTF-8 as not JSON', () => {
    expect(canonicalJson(Buffer.from([0x22, 0xff, 0x22]))).toBeUndefined();
    expect(canonicalJson(Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22]))).toBeUndefined(); // a surrogate in UTF-8
    expect(canonicalJson(Buffer.from([0x22, 0xc0, 0x80, 0x22]))).toBeUndefined(); // overlong NUL
  });

  it('nests up to MAX_JSON_DEPTH levels, and calls deeper bodies not JSON, the same on every call', () => {
    const nested = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    expect(canon(nested(MAX_JSON_DEPTH))).toBe(nested(MAX_JSON_DEPTH));
    expect(canon(nested(MAX_JSON_DEPTH + 1))).toBeUndefined();
    expect(canon(nested(200_000))).toBeUndefined();
  });

  it('agrees with JSON.parse on what parses, for JSON without repeated keys', () => {
    fc.assert(
      fc.property(fc.json({ depthSize: 'small' }), (text) => {
        const c = canon(text);
        expect(c).toBeDefined();
        // the canonical text is itself JSON, and canonical
        expect(canon(c as string)).toBe(c);
      }),
      { seed: 26, numRuns: 1000 },
    );
  });
});
