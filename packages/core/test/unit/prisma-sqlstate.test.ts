import { describe, expect, it } from 'vitest';
import { withSqlstate } from '../../src/pg/caller-transactions.js';
import { prismaSqlstate } from '../../src/prisma/index.js';

describe('prismaSqlstate', () => {
  it('reads the SQLSTATE Prisma hides', () => {
    const raw = { code: 'P2010', message: 'Raw query failed. Code: `55P03`. Message: `lock timeout`' };
    expect(prismaSqlstate(raw)).toBe('55P03');
    expect(prismaSqlstate({ code: 'P2034', message: 'write conflict or a deadlock' })).toBe('40001');
    const adapter = { code: 'P2002', meta: { driverAdapterError: { cause: { originalCode: '23505' } } } };
    expect(prismaSqlstate(adapter)).toBe('23505');
    expect(prismaSqlstate(new Error('boom'))).toBeUndefined();
    expect(prismaSqlstate('x')).toBeUndefined();
  });

  it('withSqlstate sets code over the original, keeping its message and class', () => {
    class PrismaLikeError extends Error {
      code = 'P2010';
    }
    const err = new PrismaLikeError('Raw query failed. Code: `40P01`. Message: `deadlock detected`');
    const seen = withSqlstate(
      {
        run: async () => undefined as never,
        query: async () => ({ rows: [], rowCount: 0 }),
        sqlstate: prismaSqlstate,
      },
      err,
    );
    expect(seen).toBeInstanceOf(PrismaLikeError);
    expect((seen as { code: string }).code).toBe('40P01');
    expect((seen as Error).message).toContain('deadlock');
    expect(err.code).toBe('P2010');
  });
});
