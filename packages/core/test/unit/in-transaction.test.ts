import { describe, expect, it } from 'vitest';
import type { PgClientLike, PgPoolLike, QueryResultLike } from '../../src/pg/pg-like.js';
import { inTransaction } from '../../src/pg/transaction.js';

// inTransaction's endings against a scripted client (our own PgPoolLike): what becomes of the
// connection, and whether a COMMIT that did not commit is reported. The real-database cases are
// in test/integration/in-transaction.test.ts.

interface Script {
  /** What COMMIT does: answer with this command tag, or throw this error. */
  commit: { command: string } | { error: Error };
  /** What ROLLBACK does. */
  rollback?: { error: Error };
}

function scripted(script: Script) {
  const sent: string[] = [];
  const released: Array<Error | undefined | boolean> = [];
  const client: PgClientLike = {
    async query<R>(text: string): Promise<QueryResultLike<R>> {
      sent.push(text);
      if (text === 'COMMIT') {
        if ('error' in script.commit) throw script.commit.error;
        return { rows: [], rowCount: null, command: script.commit.command };
      }
      if (text === 'ROLLBACK' && script.rollback) throw script.rollback.error;
      return { rows: [], rowCount: 0, command: text.split(' ')[0] ?? text };
    },
    release(err?: Error | boolean) {
      released.push(err);
    },
  } as PgClientLike;
  const pool = {
    connect: async () => client,
    query: async () => ({ rows: [], rowCount: 0 }),
  } as unknown as PgPoolLike;
  return { pool, sent, released };
}

describe('inTransaction', () => {
  it('resolves with the body’s value after COMMIT, and returns the connection', async () => {
    const s = scripted({ commit: { command: 'COMMIT' } });
    await expect(inTransaction(s.pool, async () => 42)).resolves.toBe(42);
    expect(s.sent).toEqual(['BEGIN', 'COMMIT']);
    expect(s.released).toEqual([undefined]);
  });

  it('rejects with COMMIT_ROLLED_BACK when COMMIT answers ROLLBACK (a statement inside had failed)', async () => {
    const s = scripted({ commit: { command: 'ROLLBACK' } });
    await expect(inTransaction(s.pool, async () => 42)).rejects.toMatchObject({ code: 'COMMIT_ROLLED_BACK' });
    // The transaction is over and the connection is clean: it goes back to the pool.
    expect(s.released).toEqual([undefined]);
  });

  it('destroys the connection when COMMIT throws: its outcome is unknown', async () => {
    const lost = Object.assign(new Error('Connection terminated unexpectedly'), {});
    const s = scripted({ commit: { error: lost } });
    await expect(inTransaction(s.pool, async () => 42)).rejects.toBe(lost);
    // No ROLLBACK on a connection whose COMMIT may have landed; it is closed, not pooled.
    expect(s.sent).toEqual(['BEGIN', 'COMMIT']);
    expect(s.released).toHaveLength(1);
    expect(s.released[0]).toBeInstanceOf(Error);
  });

  it('rolls back and returns the connection when the body throws; destroys it when ROLLBACK fails', async () => {
    const boom = new Error('boom');
    const ok = scripted({ commit: { command: 'COMMIT' } });
    await expect(inTransaction(ok.pool, async () => Promise.reject(boom))).rejects.toBe(boom);
    expect(ok.sent).toEqual(['BEGIN', 'ROLLBACK']);
    expect(ok.released).toEqual([undefined]);
    const broken = scripted({ commit: { command: 'COMMIT' }, rollback: { error: new Error('socket gone') } });
    await expect(inTransaction(broken.pool, async () => Promise.reject(boom))).rejects.toBe(boom);
    expect(broken.released[0]).toBeInstanceOf(Error);
  });
});
