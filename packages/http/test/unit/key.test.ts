import { describe, expect, it } from 'vitest';
import { parseIdempotencyKey } from '../../src/key.js';

describe('parseIdempotencyKey', () => {
  it('reads a structured-field string and a bare token as one key', () => {
    expect(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"', 255)).toEqual({
      ok: true,
      key: '8e03978e-40d5-43e8-bc93-6894a57f9324',
    });
    expect(parseIdempotencyKey('8e03978e-40d5-43e8-bc93-6894a57f9324', 255)).toEqual({
      ok: true,
      key: '8e03978e-40d5-43e8-bc93-6894a57f9324',
    });
  });

  it('unescapes the string and keeps its spaces; ignores parameters and surrounding whitespace', () => {
    expect(parseIdempotencyKey('  "a \\"b\\" \\\\c"  ', 255)).toEqual({ ok: true, key: 'a "b" \\c' });
    expect(parseIdempotencyKey('"abc";v=1', 255)).toEqual({ ok: true, key: 'abc' });
  });

  it.each(['order:42', 'a b', 'x/y=z@w', 'abc;x=1', '?1', "it's {fine} <here> [too] \\ | ^ `", 'a"b'])(
    'takes the bare key %j as it is (printable ASCII but a comma, as Stripe accepts)',
    (value) => {
      expect(parseIdempotencyKey(value, 255)).toEqual({ ok: true, key: value });
    },
  );

  it('takes every printable ASCII character but the comma in a bare key', () => {
    const all = Array.from({ length: 0x7f - 0x21 }, (_, i) => String.fromCharCode(0x21 + i))
      .filter((c) => c !== ',')
      .join('');
    expect(parseIdempotencyKey(`x ${all} x`, 255)).toEqual({ ok: true, key: `x ${all} x` });
  });

  it('takes a key with a comma when it is quoted', () => {
    expect(parseIdempotencyKey('"a,b"', 255)).toEqual({ ok: true, key: 'a,b' });
  });

  it.each([
    ['', 'empty'],
    ['""', 'empty'],
    ['   ', 'empty'],
    ['"abc', 'invalid'],
    ['"a", "b"', 'invalid'],
    ['a, b', 'invalid'],
    ['a,b', 'invalid'],
    ['"tab\there"', 'invalid'],
    ['tab\there', 'invalid'],
    ['nul\u0000', 'invalid'],
    ['del\u007f', 'invalid'],
    ['"caf\u00e9"', 'obs-text'],
    ['caf\u00e9', 'obs-text'],
  ])('refuses %j as %s', (value, problem) => {
    const parsed = parseIdempotencyKey(value, 255);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.problem).toBe(problem);
  });

  it('refuses keys over the maximum, in either form', () => {
    expect(parseIdempotencyKey('x'.repeat(10), 10).ok).toBe(true);
    const long = parseIdempotencyKey('x'.repeat(11), 10);
    expect(long.ok ? undefined : long.problem).toBe('too-long');
    const quoted = parseIdempotencyKey(`"${'x'.repeat(11)}"`, 10);
    expect(quoted.ok ? undefined : quoted.problem).toBe('too-long');
  });
});
