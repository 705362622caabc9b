import { describe, expect, it } from 'vitest';
import { fingerprintInput } from '../../src/fingerprint.js';
import type { IdempotentRequest } from '../../src/types.js';

type Over = Partial<IdempotentRequest> & { text?: string };
const req = ({ text, ...over }: Over = {}): IdempotentRequest => ({
  method: 'POST',
  target: '/charges',
  headers: { 'content-type': 'application/json' },
  body: Buffer.from(text ?? '{"a":1,"b":[1,2]}'),
  ...over,
});
const fp = (r: IdempotentRequest, headers = ['content-type']) => fingerprintInput(r, headers).toString();
const same = (a: Over, b: Over) => expect(fp(req(a))).toBe(fp(req(b)));
const differ = (a: Over, b: Over) => expect(fp(req(a))).not.toBe(fp(req(b)));

describe('fingerprintInput', () => {
  it('ignores JSON whitespace and key order', () => {
    same({ text: ' { "b" : [1,2], "a":1 }' }, {});
  });

  it('tells apart method, target, route name, chosen headers and body', () => {
    differ({ method: 'PUT' }, {});
    differ({ target: '/refunds' }, {});
    differ({ route: 'charges' }, {});
    differ({ text: '{"a":2,"b":[1,2]}' }, {});
    differ({ text: '{"a":1,"b":[2,1]}' }, {});
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

  it('tells apart two resources behind one route pattern (issue #26, item 2)', () => {
    differ(
      { target: '/accounts/A/charges', route: '/accounts/:id/charges' },
      { target: '/accounts/B/charges', route: '/accounts/:id/charges' },
    );
  });

  it('tells apart query strings, in their order (item 3a)', () => {
    differ({ target: '/charges?amount=1' }, { target: '/charges?amount=2' });
    differ({ target: '/charges?a=1&b=2' }, { target: '/charges?b=2&a=1' });
    differ({ target: '/charges' }, { target: '/charges?' });
    differ({ target: '/charges?a=b+c' }, { target: '/charges?a=b%20c' });
    differ({ target: '/a%2Fb' }, { target: '/a/b' });
  });

  it('takes targets that RFC 3986 §6.2.2 calls equal as one', () => {
    same({ target: '/a%2fb' }, { target: '/a%2Fb' });
    same({ target: '/%7Euser/%41' }, { target: '/~user/A' });
    same({ target: '/a/./b/../c' }, { target: '/a/c' });
    same({ target: '/a/%2E%2E/c' }, { target: '/c' });
    same({ target: '/a b' }, { target: '/a%20b' });
    same({ target: 'http://example.com/a?x' }, { target: '/a?x' });
  });

  it('tells apart numbers that differ past the 15th significant digit around a decimal point (item 3b)', () => {
    differ({ text: '{"n":1234567890.1234567}' }, { text: '{"n":1234567890.1234568}' });
    differ({ text: '{"n":12345678901234567890}' }, { text: '{"n":12345678901234567891}' });
    differ({ text: '{"n":1e400}' }, { text: '{"n":1e401}' });
    differ({ text: '{"n":1e-400}' }, { text: '{"n":0}' });
  });

  it('takes numbers of one exact decimal value as one', () => {
    for (const t of ['1.0', '1e0', '10e-1', '0.1e1', '1E+0', '100e-2'])
      same({ text: `{"n":${t}}` }, { text: '{"n":1}' });
    same({ text: '{"n":-0}' }, { text: '{"n":0}' });
    same({ text: '{"n":0.000e5}' }, { text: '{"n":0}' });
    same({ text: '{"n":1234567890.12345670}' }, { text: '{"n":1234567890.1234567}' });
    same({ text: `{"n":1e${'0'.repeat(30)}5}` }, { text: '{"n":100000}' });
  });

  it('tells apart JSON bodies that differ only in invalid UTF-8 bytes (item 3c)', () => {
    const body = (b: number[]) =>
      Buffer.concat([Buffer.from('{"note":"'), Buffer.from(b), Buffer.from('"}')]);
    differ({ body: body([0xff]) }, { body: body([0xfe]) });
    differ({ body: body([0xff]) }, { body: Buffer.from('{"note":"\ufffd"}') });
    same({ body: body([0xff]) }, { body: body([0xff]) });
  });

  it('compares bodies with repeated keys byte for byte', () => {
    differ({ text: '{"a":1,"a":2}' }, { text: '{"a":2}' });
    differ({ text: '{"a":1,"a":1}' }, { text: '{"a":1}' });
    same({ text: '{"a":1,"a":2}' }, { text: '{"a":1,"a":2}' });
    differ({ text: '{"a":1, "a":2}' }, { text: '{"a":1,"a":2}' });
  });

  it('compares a body as JSON whatever its Content-Type, and other bodies byte for byte', () => {
    const plain = { 'content-type': 'text/plain' };
    expect(fp(req({ headers: plain, text: 'a b' }))).not.toBe(fp(req({ headers: plain, text: 'a  b' })));
    expect(fp(req({ headers: plain, text: '[1, 2]' }))).toBe(fp(req({ headers: plain, text: '[1,2]' })));
    // ...but the Content-Type itself is compared (it is in fingerprintHeaders by default)
    differ({ headers: plain }, {});
    // a JSON text never collides with a non-JSON body of the same bytes
    expect(fp(req({ text: '"a"' }))).not.toBe(fp(req({ text: 'a' })));
  });

  it('treats string escapes as the characters they stand for', () => {
    same({ text: '{"k":"\\u0061\\/"}' }, { text: '{"k":"a/"}' });
    same({ text: '{"\\u0061":1}' }, { text: '{"a":1}' });
    differ({ text: '{"k":"\\ud800"}' }, { text: '{"k":"\\ufffd"}' });
  });

  it('keeps a "__proto__" key as a key', () => {
    differ({ text: '{"__proto__":{"x":1}}' }, { text: '{"__proto__":{"x":2}}' });
  });

  it('compares methods case-sensitively (RFC 9110 §9.1)', () => {
    differ({ method: 'post' }, { method: 'POST' });
  });

  it('tells an absent chosen header from an empty one', () => {
    expect(fp(req({ headers: {} }))).not.toBe(fp(req({ headers: { 'content-type': '' } })));
  });
});
