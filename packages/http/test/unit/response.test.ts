import { describe, expect, it } from 'vitest';
import { isStorable, storableHeaders } from '../../src/response.js';

describe('stored responses', () => {
  it('stores 2xx, 3xx and 4xx except 304, 408, 409, 425 and 429; never 5xx', () => {
    for (const s of [200, 201, 204, 301, 400, 401, 403, 404, 410, 422]) expect(isStorable(s)).toBe(true);
    for (const s of [304, 408, 409, 425, 429, 500, 502, 503]) expect(isStorable(s)).toBe(false);
  });

  it('drops hop-by-hop headers, those named by Connection, Date and Content-Length', () => {
    expect(
      storableHeaders([
        ['Content-Type', 'application/json'],
        ['Connection', 'close, X-Hop'],
        ['X-Hop', '1'],
        ['Keep-Alive', 'timeout=5'],
        ['Transfer-Encoding', 'chunked'],
        ['Date', 'Tue, 24 Nov 2026 12:00:00 GMT'],
        ['Content-Length', '10'],
        ['Set-Cookie', 'a=1'],
        ['Set-Cookie', 'b=2'],
      ]),
    ).toEqual([
      ['content-type', 'application/json'],
      ['set-cookie', 'a=1'],
      ['set-cookie', 'b=2'],
    ]);
  });
});
