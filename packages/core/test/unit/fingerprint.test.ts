import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { fingerprint, fingerprintHex, hexBytes } from '../../src/message/fingerprint.js';

// The fingerprint is stored with every claim and compared on every redelivery: whatever computes
// it must give the same SHA-256 bytes as createHash, for every input, forever.
describe('fingerprint', () => {
  const inputs: (Buffer | string)[] = [
    Buffer.alloc(0),
    '',
    Buffer.from('{"amount":7,"id":"a"}'),
    'ünïcødé ✓ \u0000 \uffff',
    Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 256)),
  ];
  for (let i = 0; i < 256; i++) inputs.push(Buffer.from([i]), `m-${i}`);

  it('is SHA-256, byte for byte, as a Buffer and as hex', () => {
    for (const data of inputs) {
      const want = createHash('sha256').update(data).digest();
      const got = fingerprint(data);
      expect(Buffer.isBuffer(got)).toBe(true);
      expect(got.equals(want)).toBe(true);
      expect(fingerprintHex(data)).toBe(want.toString('hex'));
      expect(hexBytes(fingerprintHex(data)).equals(want)).toBe(true);
    }
  });
});
