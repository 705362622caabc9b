import { describe, expect, it } from 'vitest';
import { MAX_ID_LENGTH } from '../../src/admin/index.js';
import { InvalidIdError } from '../../src/errors.js';
import type { Envelope } from '../../src/index.js';
import { resolveId } from '../../src/message/envelope.js';

const env = (id: unknown): Envelope =>
  ({
    id,
    body: Buffer.from('{}'),
    headers: {},
    source: { broker: 't', queue: 'q' },
    attempt: 1,
    redelivered: false,
  }) as Envelope;

describe('resolveId', () => {
  it('returns the delivered id', () => {
    expect(resolveId(env('abc'))).toBe('abc');
  });
  it('prefers idOf', () => {
    expect(resolveId(env('abc'), () => 'order-7')).toBe('order-7');
  });
  it.each([
    ['missing', undefined, /missing/],
    ['empty', '', /empty/],
    ['non-string', 42, /must be a string/],
    ['oversize', 'x'.repeat(MAX_ID_LENGTH + 1), /maximum is 512/],
  ])('rejects a %s id with a typed error', (_name, id, message) => {
    let caught: unknown;
    try {
      resolveId(env(id));
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(InvalidIdError);
    expect((caught as InvalidIdError).code).toBe('INVALID_ID');
    expect((caught as Error).message).toMatch(message);
  });
  it('accepts an id of exactly the maximum length and never truncates', () => {
    const id = 'y'.repeat(MAX_ID_LENGTH);
    expect(resolveId(env(id))).toBe(id);
  });
  it('counts characters as code points: 512 four-byte characters are an id, 513 are not', () => {
    const emoji = '\u{1F600}';
    expect(resolveId(env(emoji.repeat(512)))).toBe(emoji.repeat(512));
    expect(() => resolveId(env(emoji.repeat(513)))).toThrow(/513 characters; the maximum is 512/);
    expect(() => resolveId(env('é'.repeat(200) + emoji.repeat(400)))).toThrow(/600 characters/);
  });

  it('refuses lone surrogates, and an id the adapter marked unusable unless idOf gives one', () => {
    expect(() => resolveId(env('a\ud800'))).toThrow(/not well-formed Unicode/);
    expect(() => resolveId(env('\udc00b'))).toThrow(/not well-formed Unicode/);
    const lossy = { ...env('a\ufffd'), idUnusable: 'bytes not valid UTF-8' };
    expect(() => resolveId(lossy)).toThrow(/unusable: bytes not valid UTF-8/);
    expect(resolveId(lossy, () => 'k')).toBe('k');
  });

  it('turns a throwing idOf into an InvalidIdError naming it', () => {
    expect(() =>
      resolveId(env('a'), () => {
        throw new Error('no order id in body');
      }),
    ).toThrow(/idOf threw: no order id in body/);
  });
});
