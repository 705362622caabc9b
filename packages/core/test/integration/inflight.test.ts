import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox, type PgPoolLike } from '../../src/index.js';
import { DATABASE_URL } from './fixtures/db.js';

// The replay marker of a Kafka client without commit metadata, as a row (schema version 11):
// Inbox.noteInflight and Inbox.inflightEnd against a real PostgreSQL.
let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_inflight', 4);
});
afterAll(async () => {
  await db.close();
});

const handler = async () => {};
const inboxOf = (consumer: string, pool: PgPoolLike = db.pool) =>
  createInbox({ pool, schema: db.schema, consumer, handler });

describe('noteInflight / inflightEnd', () => {
  it('no row: null; a note is read back; a later note overwrites it, lower or higher', async () => {
    const a = inboxOf('inflight-a');
    expect(await a.inflightEnd('orders', 0)).toBeNull();
    await a.noteInflight('orders', 0, '41');
    expect(await a.inflightEnd('orders', 0)).toBe('41');
    await a.noteInflight('orders', 0, '99');
    expect(await a.inflightEnd('orders', 0)).toBe('99');
    // Lower is taken as it is: the next slice of a partition sought back, or a recreated topic.
    await a.noteInflight('orders', 0, '7');
    expect(await a.inflightEnd('orders', 0)).toBe('7');
    const { rows } = await db.pool.query(
      `SELECT consumer, stream, partition, end_offset::text AS end FROM ${db.schema}.inflight WHERE consumer = 'inflight-a'`,
    );
    expect(rows).toEqual([{ consumer: 'inflight-a', stream: 'orders', partition: 0, end: '7' }]);
  });

  it('rows are per consumer, stream and partition: none reads another', async () => {
    const a = inboxOf('inflight-b1');
    const b = inboxOf('inflight-b2');
    await a.noteInflight('t', 0, '10');
    await a.noteInflight('t', 1, '20');
    await a.noteInflight('u', 0, '30');
    await b.noteInflight('t', 0, '40');
    expect(await a.inflightEnd('t', 0)).toBe('10');
    expect(await a.inflightEnd('t', 1)).toBe('20');
    expect(await a.inflightEnd('u', 0)).toBe('30');
    expect(await a.inflightEnd('u', 1)).toBeNull();
    expect(await b.inflightEnd('t', 0)).toBe('40');
    expect(await b.inflightEnd('t', 1)).toBeNull();
    // Names that look like SQL or patterns are data.
    await a.noteInflight("t' OR '1'='1", 0, '50');
    await a.noteInflight('%', 0, '60');
    expect(await a.inflightEnd('t', 0)).toBe('10');
    expect(await a.inflightEnd("t' OR '1'='1", 0)).toBe('50');
    expect(await a.inflightEnd('_', 0)).toBeNull();
  });

  it('offsets keep all 64 bits: the largest Kafka offset reads back exactly', async () => {
    const a = inboxOf('inflight-c');
    const max = '9223372036854775807';
    await a.noteInflight('big', 3, max);
    expect(await a.inflightEnd('big', 3)).toBe(max);
    await a.noteInflight('big', 3, '0');
    expect(await a.inflightEnd('big', 3)).toBe('0');
  });

  it('refuses a bad argument, naming it, before any statement', async () => {
    const a = inboxOf('inflight-d');
    for (const end of ['-1', '1.5', '1e3', ' 1', '', '0x10', '9223372036854775808', '99999999999999999999']) {
      await expect(a.noteInflight('t', 0, end), end).rejects.toMatchObject({
        code: 'INVALID_OPTION',
        message: expect.stringContaining('endOffset'),
      });
    }
    await expect(a.noteInflight('t', 0, 5 as unknown as string)).rejects.toMatchObject({
      code: 'INVALID_OPTION',
    });
    for (const partition of [-1, 1.5, Number.NaN, 2 ** 31]) {
      await expect(a.noteInflight('t', partition, '1')).rejects.toMatchObject({
        code: 'INVALID_OPTION',
        message: expect.stringContaining('partition'),
      });
      await expect(a.inflightEnd('t', partition)).rejects.toMatchObject({ code: 'INVALID_OPTION' });
    }
    await expect(a.noteInflight('', 0, '1')).rejects.toMatchObject({
      code: 'INVALID_OPTION',
      message: expect.stringContaining('stream'),
    });
    await expect(a.inflightEnd('', 0)).rejects.toMatchObject({ code: 'INVALID_OPTION' });
    const { rows } = await db.pool.query(`SELECT 1 FROM ${db.schema}.inflight WHERE consumer = 'inflight-d'`);
    expect(rows).toEqual([]);
  });

  it('a note commits on its own, flushed whatever the session default, before it resolves', async () => {
    const pool = new pg.Pool({
      connectionString: DATABASE_URL,
      max: 2,
      options: '-c synchronous_commit=off',
    });
    const settings: string[] = [];
    // once's autocommit statements go through a connection of the pool: the spy reads them there.
    const spy: PgPoolLike = {
      connect: async () => {
        const client = await pool.connect();
        return {
          query: (async (text: string, values?: unknown[]) => {
            const res = await client.query(text, values);
            for (const r of (Array.isArray(res) ? res : [res]).flatMap((x) => x.rows) as {
              synchronous_commit?: string;
            }[]) {
              if (r.synchronous_commit) settings.push(r.synchronous_commit);
            }
            return res;
          }) as PgPoolLike['query'],
          release: (err?: Error | boolean) => client.release(err),
        };
      },
      query: () => Promise.reject(new Error('once reaches the pool through connect()')),
    };
    try {
      expect((await pool.query('SHOW synchronous_commit')).rows[0].synchronous_commit).toBe('off');
      const a = inboxOf('inflight-e', spy);
      await a.noteInflight('t', 0, '12');
      expect(settings).toEqual(['on']);
      // Visible to another session at once: no transaction was left open.
      expect(await inboxOf('inflight-e').inflightEnd('t', 0)).toBe('12');
    } finally {
      await pool.end();
    }
  });

  it('concurrent notes of one partition leave one of the values, never an error or two rows', async () => {
    const a = inboxOf('inflight-f');
    const ends = Array.from({ length: 20 }, (_, k) => String(100 + k));
    await Promise.all(ends.map((e) => a.noteInflight('race', 0, e)));
    expect(ends).toContain(await a.inflightEnd('race', 0));
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM ${db.schema}.inflight WHERE consumer = 'inflight-f'`,
    );
    expect(rows[0].n).toBe(1);
  });

  it('the schema missing: the database error comes through as it is', async () => {
    const a = createInbox({ pool: db.pool, schema: `${db.schema}_none`, consumer: 'x', handler });
    await expect(a.inflightEnd('t', 0)).rejects.toMatchObject({ code: '42P01' });
    await expect(a.noteInflight('t', 0, '1')).rejects.toMatchObject({ code: '42P01' });
  });
});
