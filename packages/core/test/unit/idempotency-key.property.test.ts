import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/errors.js';
import { idempotencyKey } from '../../src/message/idempotency-key.js';

// The key a far end deduplicates on: it must be the RFC 9562 version 5 UUID of once's fixed
// namespace and the length-prefixed triple, for every input, forever. The reference below is
// written from the RFC (hex digits, not byte masks) and shares no code with the implementation.
const NAMESPACE_UUID = '4f1c7e0a-9b3d-4c2e-8a5f-6d7b8c9e0a1b';

function referenceV5(namespace: string, name: string): string {
  const digest = createHash('sha1')
    .update(Buffer.concat([Buffer.from(namespace.replaceAll('-', ''), 'hex'), Buffer.from(name, 'utf8')]))
    .digest('hex')
    .slice(0, 32);
  const digits = [...digest];
  digits[12] = '5'; // version: the high nibble of octet 6
  digits[16] = ((Number.parseInt(digits[16]!, 16) % 4) + 8).toString(16); // variant 10xx
  const hex = digits.join('');
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join('-');
}

const referenceKey = (consumer: string, id: string, step: string) =>
  referenceV5(NAMESPACE_UUID, [consumer, id].map((p) => `${p.length}:${p}`).join('') + step);

// Well-formed strings: ids are refused with a lone surrogate (envelope.ts), step names too.
const text = (minLength = 0) => fc.string({ unit: 'grapheme', minLength, maxLength: 24 });
const stepName = text(1);

describe('idempotencyKey against a reference', () => {
  it('pins the key 72da536 gave (a change of namespace or encoding would re-run every effect at the far end)', () => {
    expect(idempotencyKey('billing', 'order-1', 'charge')).toBe(referenceKey('billing', 'order-1', 'charge'));
    expect(idempotencyKey('billing', 'order-1', 'charge')).toBe('98512079-3f02-532d-be60-c161bf5330cb');
  });

  it('equals the RFC 9562 v5 UUID of the length-prefixed triple', () => {
    fc.assert(
      fc.property(text(), text(), stepName, (c, i, s) => {
        expect(idempotencyKey(c, i, s)).toBe(referenceKey(c, i, s));
      }),
      { numRuns: 500 },
    );
  });

  it('gives distinct triples distinct keys, also when one string is cut in two different places', () => {
    fc.assert(
      fc.property(text(2), fc.nat(), fc.nat(), fc.nat(), fc.nat(), (whole, a, b, x, y) => {
        const points = [...whole];
        const cut = (p: number, q: number): [string, string, string] => {
          const [i, j] = [p % points.length, q % points.length].sort((m, n) => m - n) as [number, number];
          return [points.slice(0, i).join(''), points.slice(i, j).join(''), points.slice(j).join('')];
        };
        const t1 = cut(a, b);
        const t2 = cut(x, y);
        fc.pre(t1[2] !== '' && t2[2] !== '' && t1.join('\u0000') !== t2.join('\u0000'));
        expect(idempotencyKey(...t1)).not.toBe(idempotencyKey(...t2));
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.tuple(text(), text(), stepName), fc.tuple(text(), text(), stepName), (t1, t2) => {
        fc.pre(t1.join('\u0000') !== t2.join('\u0000'));
        expect(idempotencyKey(...t1)).not.toBe(idempotencyKey(...t2));
      }),
      { numRuns: 500 },
    );
  });

  it('refuses a step name with a lone surrogate, which UTF-8 would merge with another name', () => {
    fc.assert(
      fc.property(text(), fc.integer({ min: 0xd800, max: 0xdfff }), text(), (before, unit, after) => {
        const name = `${before}${String.fromCharCode(unit)}${after}`;
        fc.pre(Buffer.from(name, 'utf8').toString('utf8') !== name); // no UTF-8 round trip: a lone surrogate
        expect(() => idempotencyKey('c', 'm', name)).toThrow(
          expect.objectContaining({ code: ErrorCode.InvalidStepName }),
        );
      }),
    );
    expect(() => idempotencyKey('c', 'm', 'x\ud800')).toThrow(/lone surrogate/);
  });
});
