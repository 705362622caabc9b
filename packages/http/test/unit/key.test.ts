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

  it.each([
    ['', 'empty'],
    ['""', 'empty'],
    ['   ', 'empty'],
    ['"abc', 'invalid'],
    ['"a", "b"', 'invalid'],
    ['a, b', 'invalid'],
    ['a b', 'invalid'],
    ['abc;x=1', 'invalid'],
    ['"tab\there"', 'invalid'],
    ['?1', 'invalid'],
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
