import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { silentLogger } from '../../src/adapter/index.js';
import type { BatchMode } from '../../src/engine/options.js';
import {
  createInbox,
  type Envelope,
  type Handler,
  type Logger,
  type Outcome,
  PermanentError,
  type PgPoolLike,
} from '../../src/index.js';
import { fromJsonb } from '../../src/sql/jsonb.js';
import { DATABASE_URL, envelope } from './fixtures/db.js';

// Each test here reproduces a defect of issue #12 ("every failure path ends") that failed on
// 74d7cc7: a message that retried forever, was dropped, or collapsed into another.

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_failpaths', 8);
});
afterAll(async () => {
  await db.close();
});

const write: Handler = async (e, { tx }) => {
  await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
};
const inboxOf = (consumer: string, handler: Handler = write, patch: Record<string, unknown> = {}) =>
  createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer,
    handler,
    maxAttempts: 3,
    retryDelayMs: () => 0,
    ...patch,
  });
const failedRow = async (consumer: string, id: string) =>
  (
    await db.pool.query(
      `SELECT status, error, origin, attempts, body_truncated FROM ${db.schema}.inbox WHERE consumer = $1 AND message_id = $2`,
      [consumer, id],
    )
  ).rows[0];
/** Delivers like a broker: again and again, attempt rising when spent, until the message ends. */
async function untilEnded(
  process: (e: Envelope) => Promise<Outcome>,
  e: Envelope,
  max = 10,
): Promise<Outcome[]> {
  const seen: Outcome[] = [];
  let attempt = 1;
  for (let i = 0; i < max; i++) {
    const o = await process({ ...e, attempt, redelivered: attempt > 1 });
    seen.push(o);
    if (o.status !== 'retry' && o.status !== 'not-run' && o.status !== 'busy') return seen;
    if (o.status === 'retry' && o.spent) attempt++;
  }
  return seen;
}

describe('a failure that cannot be stored as it is still ends the message (defects 1, 2)', () => {
  it('a NUL in the error, a header and the origin: recorded failed and dead-lettered, byte-identical on read', async () => {
    const message = 'Unexpected token \u0000 in JSON at position 3';
    const ib = inboxOf('nul-error', async () => {
      throw new PermanentError(message);
    });
    const e = envelope('nul-1', { headers: { 'x-trace': 'a\u0000b', 'x-lone': 'c\ud800' } });
    const o = await ib.process(e);
    expect(o).toMatchObject({ status: 'failed', reason: 'permanent', error: { message } });
    const row = await failedRow('nul-error', 'nul-1');
    expect(row.status).toBe('failed');
    expect(fromJsonb<{ message: string }>(row.error).message).toBe(message);
    expect(fromJsonb<{ headers: Record<string, string> }>(row.origin).headers).toEqual({
      'x-trace': 'a\u0000b',
      'x-lone': 'c\ud800',
    });
    // The redelivery is recognised at once, not run again.
    expect(await ib.process({ ...e, redelivered: true, attempt: 2 })).toMatchObject({
      status: 'failed',
      reason: 'previously-failed',
    });
  });

  it('a stored result holding NUL reaches a duplicate unchanged', async () => {
    const result = { note: 'x\u0000y', lone: '\udbff', nested: ['\u0000'] };
    const ib = inboxOf(
      'nul-result',
      async (e, ctx) => {
        await write(e, ctx);
        return result;
      },
      { storeResult: true },
    );
    expect(await ib.process(envelope('r-1'))).toMatchObject({ status: 'processed' });
    const again = await ib.process(envelope('r-1', { redelivered: true, attempt: 2 }));
    expect(again).toMatchObject({ status: 'duplicate' });
    expect(again.status === 'duplicate' && again.result).toEqual(result);
  });

  it('a deferred constraint failing at COMMIT counts, and ends failed at maxAttempts', async () => {
    await db.pool.query(`CREATE TABLE ${db.schema}.deferred (id text,
      CONSTRAINT must_be_ok CHECK (id <> 'bad') NOT VALID)`);
    await db.pool.query(`CREATE TABLE ${db.schema}.parents (id text PRIMARY KEY)`);
    await db.pool.query(`CREATE TABLE ${db.schema}.children (parent text REFERENCES ${db.schema}.parents (id)
      DEFERRABLE INITIALLY DEFERRED)`);
    let runs = 0;
    const ib = inboxOf('deferred', async (_e, { tx }) => {
      runs++;
      await tx.query(`INSERT INTO ${db.schema}.children (parent) VALUES ('nobody')`);
    });
    const seen = await untilEnded((x) => ib.process(x), envelope('d-1'));
    expect(seen.map((o) => o.status)).toEqual(['retry', 'retry', 'failed']);
    expect(seen[0]).toMatchObject({ spent: true, error: { code: '23503' } });
    expect(seen[2]).toMatchObject({ reason: 'max-attempts' });
    expect(runs).toBe(3);
    expect((await failedRow('deferred', 'd-1')).status).toBe('failed');
  });

  it('a full record that the table refuses falls back to a minimal one, and the message still ends', async () => {
    // A constraint the operator added makes the full record (with its origin) unstorable.
    await db.pool.query(`CREATE SCHEMA IF NOT EXISTS ${db.schema}_min`);
    const { migrate } = await import('../../src/index.js');
    const schema = `${db.schema}_min`;
    await migrate(db.pool, { schema });
    await db.pool.query(
      `ALTER TABLE ${schema}.inbox ADD CONSTRAINT small_origin CHECK (origin IS NULL OR octet_length(origin::text) < 200)`,
    );
    const ib = createInbox({
      pool: db.pool,
      schema,
      consumer: 'minimal',
      handler: async () => {
        throw new PermanentError('no');
      },
    });
    const o = await ib.process(envelope('m-1', { headers: { big: 'x'.repeat(500) } }));
    expect(o).toMatchObject({ status: 'failed', reason: 'permanent' });
    const row = (
      await db.pool.query(`SELECT status, error, origin FROM ${schema}.inbox WHERE message_id = 'm-1'`)
    ).rows[0];
    expect(row).toMatchObject({ status: 'failed', origin: null });
    expect(row.error.message).toMatch(/full failure record could not be stored/);
    await db.pool.query(`DROP SCHEMA ${schema} CASCADE`);
  });
});

describe.each<BatchMode>(['optimistic', 'savepoint'])(
  'batches (%s) end every member (defect 3)',
  (batchMode) => {
    it('a handler that swallows a failed query: the others are processed, it alone ends failed', async () => {
      const consumer = `swallow-${batchMode}`;
      let culpritRuns = 0;
      const ib = inboxOf(
        consumer,
        async (e, ctx) => {
          if (e.id?.endsWith('-3')) {
            culpritRuns++;
            await ctx.tx.query('SELECT 1/0').catch(() => {});
            return;
          }
          await write(e, ctx);
        },
        { batchMode },
      );
      const ids = Array.from({ length: 6 }, (_, i) => `${consumer}-${i}`);
      let batch = ids.map((id) => envelope(id));
      const ended = new Map<string, Outcome>();
      for (let round = 0; round < 10 && batch.length > 0; round++) {
        const out = await ib.processBatch(batch);
        batch = [];
        for (const o of out) {
          if (o.status === 'retry' || o.status === 'not-run' || o.status === 'busy') {
            const spent = o.status === 'retry' && o.spent;
            batch.push({ ...o.envelope, attempt: o.envelope.attempt + (spent ? 1 : 0), redelivered: true });
          } else ended.set(o.id!, o);
        }
      }
      expect(batch).toHaveLength(0);
      for (const id of ids) {
        expect(ended.get(id)?.status, id).toBe(id.endsWith('-3') ? 'failed' : 'processed');
      }
      expect(culpritRuns).toBeLessThanOrEqual(3 + 1);
      const counts = await db.counts();
      for (const id of ids) if (!id.endsWith('-3')) expect(counts.get(id), id).toBe(1);
    });
  },
);

describe('ids that would collapse into another (defect 5)', () => {
  it('lone surrogates are invalid ids, each one, never a duplicate of the other', async () => {
    const ib = inboxOf('lone');
    for (const id of ['order-\ud800', 'order-\udbff', '\udc00']) {
      expect(await ib.process(envelope(id))).toMatchObject({ status: 'failed', reason: 'invalid-id' });
    }
    expect(await ib.process(envelope('order-\ud83d\ude00'))).toMatchObject({ status: 'processed' });
  });

  it('an adapter that could not read the id faithfully makes it invalid, unless idOf gives one', async () => {
    const bad = envelope('order-\ufffd', { idUnusable: 'its bytes are not valid UTF-8' });
    expect(await inboxOf('lossy').process(bad)).toMatchObject({
      status: 'failed',
      reason: 'invalid-id',
      error: { message: /not valid UTF-8/ },
    });
    const withIdOf = inboxOf('lossy-idof', write, { idOf: () => 'business-1' });
    expect(await withIdOf.process(bad)).toMatchObject({ status: 'processed', id: 'business-1' });
  });
});

describe('a throwing fingerprintOf is the message’s failure, recorded under its id (defect 10)', () => {
  it('failed permanent, with a row, and a neighbour in the batch is processed', async () => {
    const ib = inboxOf('fp-throws', write, {
      fingerprintOf: (e: Envelope) => {
        if (e.id === 'fp-bad') throw new Error('no amount field');
        return e.body;
      },
    });
    const out = await ib.processBatch([envelope('fp-ok'), envelope('fp-bad'), envelope('fp-ok2')]);
    expect(out.map((o) => o.status)).toEqual(['processed', 'failed', 'processed']);
    expect(out[1]).toMatchObject({
      reason: 'permanent',
      error: { message: /fingerprintOf threw: no amount field/ },
    });
    expect((await failedRow('fp-throws', 'fp-bad')).status).toBe('failed');
  });
});

describe('the database, not the message (setup faults and outages)', () => {
  it('PostgreSQL unreachable: not-run, never spent, never dead-lettered', async () => {
    const pool = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/test', max: 1 });
    try {
      const ib = createInbox({ pool, schema: db.schema, consumer: 'down', handler: write, maxAttempts: 1 });
      for (const attempt of [1, 5]) {
        expect(await ib.process(envelope('down-1', { attempt }))).toMatchObject({
          status: 'not-run',
          why: 'unavailable',
        });
      }
      expect(ib.available).toBe(false);
      expect(await ib.processBatch([envelope('down-2'), envelope('down-3')])).toMatchObject([
        { status: 'not-run', why: 'unavailable' },
        { status: 'not-run', why: 'unavailable' },
      ]);
    } finally {
      await pool.end();
    }
  });

  it('a consumer started before migrate() runs nothing, is unavailable, then processes once migrated', async () => {
    const schema = `${db.schema}_late`;
    const ib = createInbox({
      pool: db.pool,
      schema,
      consumer: 'late',
      handler: async () => {},
      maxAttempts: 1,
    });
    expect(ib.available).toBe(true);
    for (const attempt of [1, 3]) {
      expect(await ib.process(envelope('late-1', { attempt }))).toMatchObject({
        status: 'not-run',
        why: 'unavailable',
      });
    }
    expect(ib.available).toBe(false);
    const { migrate } = await import('../../src/index.js');
    await migrate(db.pool, { schema });
    expect(await ib.process(envelope('late-1', { attempt: 4 }))).toMatchObject({ status: 'processed' });
    expect(ib.available).toBe(true);
    await db.pool.query(`DROP SCHEMA ${schema} CASCADE`);
  });

  it('an idle pooled backend terminated does not kill the process: the pool gets a logging listener', async () => {
    const warnings: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (_f, m) => warnings.push(m) };
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2, idleTimeoutMillis: 0 });
    try {
      const ib = createInbox({ pool, schema: db.schema, consumer: 'idle', handler: write, logger });
      expect(await ib.process(envelope('idle-1'))).toMatchObject({ status: 'processed' });
      const pids = (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows.map(
        (r) => r.pid,
      );
      await db.pool.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
      const idle = () => warnings.filter((w) => /idle PostgreSQL connection/.test(w));
      for (let i = 0; i < 50 && idle().length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(idle()).toHaveLength(1);
      // The pool's settings warning (no keepAlive, no connectionTimeoutMillis) came first, at start.
      expect(warnings[0]).toMatch(/pool has no keepAlive: true and no connectionTimeoutMillis/);
      expect(await ib.process(envelope('idle-2'))).toMatchObject({ status: 'processed' });
    } finally {
      await pool.end();
    }
  });

  it('the failed record pins synchronous_commit on, whatever the session default', async () => {
    const pool = new pg.Pool({
      connectionString: DATABASE_URL,
      max: 2,
      options: '-c synchronous_commit=off',
    });
    const settings: string[] = [];
    // once's autocommit statements go through a connection of the pool (bounded-pool.ts): the
    // spy reads their results there.
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
      const ib = createInbox({
        pool: spy,
        schema: db.schema,
        consumer: 'sync',
        handler: async () => {
          throw new PermanentError('no');
        },
      });
      expect(await ib.process(envelope('sync-1'))).toMatchObject({ status: 'failed' });
      expect(settings).toEqual(['on']);
    } finally {
      await pool.end();
    }
  });
});

describe('a batch that deadlocks on the handlers’ own rows (defect 11)', () => {
  it('is replayed one message per transaction at once, not returned as retry', async () => {
    await db.pool.query(`CREATE TABLE ${db.schema}.accounts (id text PRIMARY KEY, n int NOT NULL)`);
    await db.pool.query(`INSERT INTO ${db.schema}.accounts VALUES ('A', 0), ('B', 0)`);
    const gate = { arrived: 0, open: undefined as (() => void) | undefined };
    const bothIn = new Promise<void>((resolve) => {
      gate.open = resolve;
    });
    const ib = inboxOf('deadlock', async (e, { tx }) => {
      const account = JSON.parse(e.body.toString()).account as string;
      await tx.query(`UPDATE ${db.schema}.accounts SET n = n + 1 WHERE id = $1`, [account]);
      if (e.id?.endsWith('-first')) {
        // Both batches hold their first row before either takes its second: a sure deadlock.
        if (++gate.arrived === 2) gate.open?.();
        await bothIn;
      }
    });
    const body = (account: string) => Buffer.from(JSON.stringify({ account }));
    const [one, two] = await Promise.all([
      ib.processBatch([envelope('x-first', { body: body('A') }), envelope('x-second', { body: body('B') })]),
      ib.processBatch([envelope('y-first', { body: body('B') }), envelope('y-second', { body: body('A') })]),
    ]);
    expect([...one!, ...two!].map((o) => o.status)).toEqual([
      'processed',
      'processed',
      'processed',
      'processed',
    ]);
    const n = await db.pool.query(`SELECT sum(n)::int AS n FROM ${db.schema}.accounts`);
    expect(n.rows[0].n).toBe(4);
    // Then batching pauses for this inbox: the next batch runs one message per transaction.
    const after = await ib.processBatch([
      envelope('z-1', { body: body('A') }),
      envelope('z-2', { body: body('B') }),
    ]);
    expect(after.map((o) => o.status)).toEqual(['processed', 'processed']);
    const rows = await db.pool.query<{ x: string }>(
      `SELECT xmin::text AS x FROM ${db.schema}.inbox WHERE consumer = 'deadlock' AND message_id IN ('z-1', 'z-2')`,
    );
    expect(new Set(rows.rows.map((r) => r.x)).size).toBe(2);
  });
});
