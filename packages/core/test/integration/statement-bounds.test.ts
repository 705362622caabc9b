import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy, freshDb, waitFor } from '../../../../test/support/index.js';
import {
  createInbox,
  createOutbox,
  createRelay,
  type Handler,
  type InboxOptions,
  type OutboxPublisher,
  type PgPoolLike,
} from '../../src/index.js';
import { DATABASE_URL, envelope } from './fixtures/db.js';

// Every statement once sends and every connection it takes is bounded on the client, with a
// default `new pg.Pool()` (no keepAlive, no connectionTimeoutMillis, no query_timeout), against
// the real PostgreSQL behind a FaultProxy gone dark: it stops forwarding bytes without closing
// anything, so the client hears silence, not an error.

let db: Awaited<ReturnType<typeof freshDb>>;
let proxy: FaultProxy;
const pools: pg.Pool[] = [];

beforeAll(async () => {
  db = await freshDb('core_bounds');
  proxy = await FaultProxy.start({ host: '127.0.0.1', port: Number(new URL(DATABASE_URL).port || 5432) });
});
afterAll(async () => {
  proxy.light();
  for (const p of pools) await p.end().catch(() => {});
  await proxy.close();
  await db.close();
});

/** A default pool through the proxy: nothing set but where to connect. */
function defaultPool(): pg.Pool {
  const pool = new pg.Pool({ connectionString: proxy.url(DATABASE_URL) });
  pool.on('error', () => {});
  pools.push(pool);
  return pool;
}

// Far above a healthy statement or connect on a loaded machine, far below TCP's own timeouts.
const BOUND = { statementTimeoutMs: 2_000, connectTimeoutMs: 3_000 };

function inboxOn(pool: PgPoolLike, consumer: string, handler: Handler, patch: Partial<InboxOptions> = {}) {
  return createInbox({ pool, schema: db.schema, consumer, handler, ...BOUND, ...patch });
}

/** Inserts the effect, then (on its first run only) does `then`. */
const effect = (then?: () => void): Handler => {
  let first = true;
  return async (e, { tx }) => {
    await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
    if (first) then?.();
    first = false;
  };
};

/** Pools' connections still out of the pool: a destroyed connection is neither out nor idle. */
function held(pool: pg.Pool): number {
  return pool.totalCount - pool.idleCount;
}

describe('statement bound (statementTimeoutMs), default pg.Pool, dark path', () => {
  it('COMMIT that reached the server but whose reply never comes: retry unspent, connection destroyed; redelivery is a duplicate, one effect', async () => {
    const pool = defaultPool();
    const inbox = inboxOn(
      pool,
      'commit-applied',
      effect(() => proxy.dark('to-client')),
    );
    await inbox.ready();
    const o = await inbox.process(envelope('b1'));
    expect(o).toMatchObject({ status: 'retry', spent: false, error: { code: 'STATEMENT_TIMEOUT' } });
    // The socket was destroyed, not returned to the pool.
    expect(pool.totalCount).toBe(0);
    proxy.light();
    // The COMMIT had taken effect: the claim says so on redelivery.
    const again = await inbox.process(envelope('b1', { redelivered: true, attempt: 2 }));
    expect(again.status).toBe('duplicate');
    expect((await db.counts()).get('b1')).toBe(1);
    expect(held(pool)).toBe(0);
  });

  it('COMMIT that never reached the server: retry unspent; once the dead connection is gone, redelivery runs afresh, one effect', async () => {
    const pool = defaultPool();
    const inbox = inboxOn(
      pool,
      'commit-lost',
      effect(() => proxy.dark('both')),
    );
    await inbox.ready();
    const o = await inbox.process(envelope('b2'));
    expect(o).toMatchObject({ status: 'retry', spent: false, error: { code: 'STATEMENT_TIMEOUT' } });
    expect(pool.totalCount).toBe(0);
    // The path stays dark for the held COMMIT until the server loses the connection: the proxy's
    // reset ends its backend, which rolls the transaction back.
    proxy.cutAll();
    proxy.light();
    const again = await inbox.process(envelope('b2', { redelivered: true, attempt: 2 }));
    expect(again.status).toBe('processed');
    expect((await db.counts()).get('b2')).toBe(1);
    expect(held(pool)).toBe(0);
  });

  it('the claim itself: not-run, the pool stays usable for the next message', async () => {
    const pool = defaultPool();
    const inbox = inboxOn(pool, 'claim-dark', effect());
    await inbox.ready();
    proxy.dark('to-client');
    const o = await inbox.process(envelope('b3'));
    expect(o.status).toBe('not-run');
    expect(o).toMatchObject({ error: { code: 'STATEMENT_TIMEOUT' } });
    expect(pool.totalCount).toBe(0);
    proxy.cutAll();
    proxy.light();
    expect((await inbox.process(envelope('b3', { redelivered: true, attempt: 2 }))).status).toBe('processed');
    expect((await inbox.process(envelope('b4'))).status).toBe('processed');
    expect((await db.counts()).get('b3')).toBe(1);
  });

  it("the handler's own statements are not bounded by it (handlerTimeoutMs is theirs)", async () => {
    const o = await inboxOn(db.pool, 'handler-long', async (e, { tx }) => {
      await tx.query('SELECT pg_sleep(2.5)');
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
    }).process(envelope('b5'));
    expect(o.status).toBe('processed');
  });
});

describe('connect bound (connectTimeoutMs), default pg.Pool, dark path', () => {
  it('no connection in time: not-run with CONNECT_TIMEOUT; the late connection is returned to the pool, not leaked', async () => {
    const pool = defaultPool();
    const inbox = inboxOn(pool, 'connect-dark', effect(), { connectTimeoutMs: 500 });
    proxy.dark('both');
    const o = await inbox.process(envelope('c1'));
    expect(o.status).toBe('not-run');
    expect(o).toMatchObject({ error: { code: 'CONNECT_TIMEOUT' } });
    proxy.light();
    // The connection pg was making completes now; nobody waits for it, so it goes back idle.
    await waitFor(
      'the late connection back in the pool',
      () => pool.totalCount === 1 && pool.idleCount === 1,
    );
    expect((await inbox.process(envelope('c1', { attempt: 2 }))).status).toBe('processed');
    expect(held(pool)).toBe(0);
  });
});

describe('relay round bound', () => {
  it('a claim with no reply ends the round with STATEMENT_TIMEOUT; its rows stay pending and go out after the path heals', async () => {
    const pool = defaultPool();
    await createOutbox({ pool: db.pool, schema: db.schema, destinations: ['d'] }).enqueue(db.pool, 'd', 'x', {
      messageId: 'r1',
    });
    const sent: string[] = [];
    const publisher: OutboxPublisher = {
      publish: async (messages) => {
        for (const m of messages) sent.push(m.id);
      },
    };
    const relay = createRelay({
      pool,
      schema: db.schema,
      listen: false,
      publishers: { d: publisher },
      ...BOUND,
    });
    // Warm one connection, then go dark.
    await pool.query('SELECT 1');
    proxy.dark('to-client');
    await expect(relay.runOnce()).rejects.toMatchObject({ code: 'STATEMENT_TIMEOUT', statement: 'BEGIN' });
    expect(sent).toEqual([]);
    expect(pool.totalCount).toBe(0);
    proxy.cutAll();
    proxy.light();
    expect(await relay.runOnce()).toBe(1);
    expect(sent).toEqual(['r1']);
    expect(held(pool)).toBe(0);
  });
});
