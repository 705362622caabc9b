import { describe, expect, it } from 'vitest';
import { freshSchemaName, quoteIdent, uniqueName } from '../support/index.js';

describe('test isolation names', () => {
  it('makes valid, unique, lower-case schema names within 63 bytes', () => {
    const names = new Set(Array.from({ length: 1000 }, () => freshSchemaName('Inbox-Test.1')));
    expect(names.size).toBe(1000);
    for (const n of names) {
      expect(n).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(Buffer.byteLength(n)).toBeLessThanOrEqual(63);
    }
    expect(freshSchemaName('9lives')).toMatch(/^t9lives_/);
    expect(freshSchemaName('x'.repeat(100)).length).toBeLessThanOrEqual(63);
  });

  it('makes topic/queue names that leave room for .fifo', () => {
    const n = uniqueName('Orders_Topic');
    expect(n).toMatch(/^orders-topic-[a-z0-9]+$/);
    expect(uniqueName('q'.repeat(200)).length).toBeLessThanOrEqual(60);
    expect(uniqueName('a')).not.toBe(uniqueName('a'));
  });

  it('quotes identifiers', () => {
    expect(quoteIdent('a"b')).toBe('"a""b"');
  });
});
