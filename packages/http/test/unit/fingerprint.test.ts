import { describe, expect, it } from 'vitest';
import { fingerprintInput } from '../../src/fingerprint.js';
import type { IdempotentRequest } from '../../src/types.js';

const req = (over: Partial<IdempotentRequest> & { text?: string } = {}): IdempotentRequest => ({
  method: 'POST',
  route: '/charges',
  headers: { 'content-type': 'application/json' },
  body: Buffer.from(over.text ?? '{"a":1,"b":[1,2]}'),
  ...over,
});
const fp = (r: IdempotentRequest, headers = ['content-type']) => fingerprintInput(r, headers).toString();

describe('fingerprintInput', () => {
  it('ignores JSON whitespace and key order', () => {
    expect(fp(req({ text: ' { "b" : [1,2], "a":1 }' }))).toBe(fp(req()));
  });

  it('tells apart method, route, chosen headers and body', () => {
    const base = fp(req());
    expect(fp(req({ method: 'PUT' }))).not.toBe(base);
    expect(fp(req({ route: '/refunds' }))).not.toBe(base);
    expect(fp(req({ text: '{"a":2,"b":[1,2]}' }))).not.toBe(base);
    expect(fp(req({ text: '{"a":1,"b":[2,1]}' }))).not.toBe(base);
    expect(
      fp(req({ headers: { 'content-type': 'application/json', 'x-tenant': 't1' } }), [
        'content-type',
        'x-tenant',
      ]),
    ).not.toBe(
      fp(req({ headers: { 'content-type': 'application/json', 'x-tenant': 't2' } }), [
        'content-type',
        'x-tenant',
      ]),
    );
  });

  it('ignores headers that were not chosen', () => {
    expect(fp(req({ headers: { 'content-type': 'application/json', 'x-trace': '1' } }))).toBe(fp(req()));
  });

  it('compares bytes when JSON numbers would lose digits, and for other media types', () => {
    expect(fp(req({ text: '{"n":12345678901234567890}' }))).not.toBe(
      fp(req({ text: '{"n":12345678901234567891}' })),
    );
    expect(fp(req({ text: '{"n":1e400}' }))).not.toBe(fp(req({ text: '{"n":1e401}' })));
    const plain = { 'content-type': 'text/plain' };
    expect(fp(req({ headers: plain, text: 'a b' }))).not.toBe(fp(req({ headers: plain, text: 'a  b' })));
  });

  it('keeps a "__proto__" key as a key', () => {
    expect(fp(req({ text: '{"__proto__":{"x":1}}' }))).not.toBe(fp(req({ text: '{"__proto__":{"x":2}}' })));
  });
});
