import { describe, expect, it } from 'vitest';
import { decodeMarker, encodeMarker } from '../../src/replay-marker.js';

describe('replay marker', () => {
  it('round-trips', () => {
    expect(decodeMarker(encodeMarker({ end: '99' }))).toEqual({ end: '99' });
    // Markers of versions that counted starts in Kafka: the range is kept, the count is not.
    expect(decodeMarker('once:1:{"end":"99","at":"12","starts":3}')).toEqual({ end: '99' });
  });

  it('ignores metadata it did not write or cannot read', () => {
    for (const m of [null, undefined, '', 'hello', 'once:1:{', 'once:1:{"end":-1}', 'once:1:{"end":"1e3"}']) {
      expect(decodeMarker(m)).toBeUndefined();
    }
  });
});
