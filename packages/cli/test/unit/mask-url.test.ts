import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { maskUrl } from '../../src/mask-url.js';

describe('maskUrl', () => {
  it.each([
    ['postgres://u:secret@h:5432/db', 'postgres://u:***@h:5432/db'],
    ['postgres://u@h/db', 'postgres://u@h/db'],
    ['postgres://u@h:5432/db', 'postgres://u@h:5432/db'],
    // Everything after a password parameter: an unencoded `&` may be part of it.
    ['postgres://h/db?password=secret&sslmode=require', 'postgres://h/db?password=***'],
    ['postgres://h/db?sslmode=require&sslpassword=secret', 'postgres://h/db?sslmode=require&sslpassword=***'],
    ['postgres://h/db?pass%77ord=secret', 'postgres://h/db?pass%77ord=***'],
    ['postgresql://u:p%40ss@h/db', 'postgresql://u:***@h/db'],
    ['not a url u:secret@', 'not a url u:***@'],
    ['postgres:/u:secret@h/db', 'postgres:/u:***@h/db'],
    ['//u:secret@host', '//u:***@host'],
    ['host=h password=secret', 'host=h password=***'],
    // Unencoded delimiters in the password: a parser puts pieces of it in the host, path, query, fragment.
    ['postgres://u:se/cret@h:5432/db', 'postgres://u:***@h:5432/db'],
    ['postgres://u:12/secret@h/db', 'postgres://u:***@h/db'],
    ['postgres://u:se?cret@h/db', 'postgres://u:***@h/db'],
    ['postgres://u:se#cret@h/db', 'postgres://u:***@h/db'],
    ['postgres://u:se@cr:et@h/db', 'postgres://u:***@h/db'],
    ['postgres://u:se cret@h/db', 'postgres://u:***@h/db'],
    ['postgres://u:a password=secret@h', 'postgres://u:***'],
    ['postgres://h:5432/db?password=se@cret', 'postgres://h:***'],
  ])('%s', (url, masked) => {
    expect(maskUrl(url)).toBe(masked);
    expect(maskUrl(url)).not.toMatch(/secret|cret/);
  });

  // Every piece of the password that is not a delimiter is a marker: a leak of any piece of it,
  // however the URL is cut, shows a marker.
  const markers = fc.constantFrom('zQmk', 'pWxv', 'tRjy', 'kVns');
  const delimiter = fc.constantFrom('/', '@', ':', '?', '#', '%', ' ', '&', '=', '%2F', '%4', '\\');
  const password = fc
    .array(fc.oneof(markers, delimiter, fc.string({ unit: 'grapheme-ascii', maxLength: 3 })), {
      minLength: 1,
      maxLength: 10,
    })
    .map((parts) => `${parts.join('')}zQmk`);
  const leaked = (text: string) => /zQmk|pWxv|tRjy|kVns/.test(text);

  it('property: no piece of a userinfo password of any printable characters is shown', () => {
    fc.assert(
      fc.property(
        password,
        fc.constantFrom('postgres', 'postgresql', 'socket'),
        fc.constantFrom('127.0.0.1:5432/app', 'db/app?sslmode=require', '/var/run/postgresql?db=app', ''),
        (pw, scheme, rest) => {
          expect(leaked(maskUrl(`${scheme}://app:${pw}@${rest}`))).toBe(false);
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('property: nor of one in a password parameter', () => {
    fc.assert(
      fc.property(password, fc.constantFrom('password', 'sslpassword', 'PASSWORD'), (pw, name) => {
        expect(leaked(maskUrl(`postgres://app@db:5432/app?sslmode=require&${name}=${pw}`))).toBe(false);
        expect(leaked(maskUrl(`postgres://db/app?${name}=${pw}&application_name=x`))).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });
});
