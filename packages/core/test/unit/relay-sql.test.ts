import { describe, expect, it } from 'vitest';
import { bigintArrayLiteral, integerLiteral } from '../../src/sql/literal.js';
import { outboxSql } from '../../src/sql/outbox.js';

describe("the relay's one-round-trip statements", () => {
  const sql = outboxSql('"once"');

  it('BEGIN, the pinned synchronous_commit and the claim travel together, the limit as an integer', () => {
    const text = sql.beginAndClaim(100);
    expect(text.startsWith('BEGIN; SET LOCAL synchronous_commit = on; SELECT o.seq')).toBe(true);
    expect(text).toContain('LIMIT 100');
    expect(text).toContain('FOR UPDATE OF o SKIP LOCKED');
    expect(sql.claim).toContain('LIMIT $1');
  });

  it('mark-sent and COMMIT travel together, the rows as a bigint array', () => {
    expect(sql.markSentAndCommit(['1', '22', '9223372036854775807'])).toMatch(
      /WHERE seq = ANY\('\{1,22,9223372036854775807\}'::bigint\[\]\); COMMIT$/,
    );
  });

  it('refuses anything but integers', () => {
    expect(() => integerLiteral(1.5)).toThrow();
    expect(() => integerLiteral(-1)).toThrow();
    expect(() => bigintArrayLiteral(['1', "1'); DROP TABLE x; --"])).toThrow();
    expect(() => bigintArrayLiteral(['1e3'])).toThrow();
  });
});
