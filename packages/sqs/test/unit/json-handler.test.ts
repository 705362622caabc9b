import { PermanentError } from '@once/core';
import { describe, expect, it } from 'vitest';
import { jsonHandler } from '../../src/index.js';

const envelope = (body: string) => ({
  body: Buffer.from(body),
  headers: {},
  source: { broker: 'sqs', queue: 'q' },
  attempt: 1,
  redelivered: false,
});
const ctx = {} as never;

describe('jsonHandler', () => {
  it('hands the parsed body to the handler', async () => {
    const h = jsonHandler<{ a: number }>((v) => v.a + 1);
    expect(await h(envelope('{"a":1}'), ctx)).toBe(2);
  });

  it('turns a malformed body and a failed validation into PermanentError', () => {
    const h = jsonHandler(
      () => 1,
      (v) => {
        if (typeof v !== 'object') throw new Error('not an object');
        return v;
      },
    );
    expect(() => h(envelope('{nope'), ctx)).toThrow(PermanentError);
    expect(() => h(envelope('{nope'), ctx)).toThrow(/not valid JSON/);
    expect(() => h(envelope('3'), ctx)).toThrow(/failed validation: not an object/);
  });
});
