import { MAX_ID_BYTES, MAX_ID_LENGTH } from '@once/core/admin';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_KEY_LENGTH } from '../../src/options.js';
import { MAX_ENCODED_SCOPE_LENGTH, messageIdOf, scopeProblem } from '../../src/scope.js';

const printable = fc.string({
  unit: fc.constantFrom(...Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i))),
  minLength: 1,
  maxLength: MAX_KEY_LENGTH,
});

describe('messageIdOf', () => {
  it('keeps a short scope readable', () => {
    expect(messageIdOf('acct_1', 'k1')).toBe('acct_1/k1');
    expect(messageIdOf('a/b c', 'k1')).toBe('a%2Fb%20c/k1');
  });

  it('hashes a long scope deterministically, and different long scopes apart', () => {
    const long = 'tenant:'.padEnd(1000, 'x');
    const id = messageIdOf(long, 'k');
    expect(id).toBe(messageIdOf(long, 'k'));
    expect(id.startsWith('#')).toBe(true);
    expect(messageIdOf(`${long}y`, 'k')).not.toBe(id);
  });

  it('never lets two (scope, key) pairs share an id, and stays within core limits', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 400 }),
        fc.string({ minLength: 1, maxLength: 400 }),
        printable,
        printable,
        (s1, s2, k1, k2) => {
          const a = messageIdOf(s1, k1);
          const b = messageIdOf(s2, k2);
          if (s1 !== s2 || k1 !== k2) expect(a).not.toBe(b);
          for (const id of [a, b]) {
            expect(id.length).toBeLessThanOrEqual(MAX_ID_LENGTH);
            expect(Buffer.byteLength(id)).toBeLessThanOrEqual(MAX_ID_BYTES);
          }
        },
      ),
    );
    expect(MAX_ENCODED_SCOPE_LENGTH + 1 + MAX_KEY_LENGTH).toBeLessThanOrEqual(MAX_ID_LENGTH);
  });

  it('names a scope it cannot use', () => {
    expect(scopeProblem('')).toMatch(/empty/);
    expect(scopeProblem(undefined)).toMatch(/not a string/);
    expect(scopeProblem('a\uD800b')).toMatch(/surrogate/);
    expect(scopeProblem('acct_1')).toBeUndefined();
  });
});
