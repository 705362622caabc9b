import { describe, expect, it } from 'vitest';
import { decodeMarker, encodeMarker } from '../../src/replay-marker.js';

describe('replay marker', () => {
  it('round-trips', () => {
    expect(decodeMarker(encodeMarker({ end: '99' }))).toEqual({ end: '99' });
    expect(decodeMarker(encodeMarker({ end: '99', at: '12', starts: 3 }))).toEqual({
      end: '99',
      at: '12',
      starts: 3,
    });
  });

  it('ignores metadata it did not write or cannot read', () => {
    for (const m of [
      null,
      undefined,
      '',
      'hello',
      'once:1:{',
      'once:1:{"end":-1}',
      'once:1:{"end":"1","at":"2"}',
    ]) {
      expect(decodeMarker(m)).toBeUndefined();
    }
  });
});
