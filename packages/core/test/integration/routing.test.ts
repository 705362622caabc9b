import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabases, serviceEnv, type TestDatabases } from '../../../../test/support/index.js';
import { copyInboxRows } from '../../src/admin/index.js';
import {
  createInbox,
  createOutbox,
  type Envelope,
  ErrorCode,
  type Handler,
  HOLD,
  type Inbox,
  migrateDatabases,
  type Outcome,
} from '../../src/index.js';

// An inbox over three real databases on the one server, a database per tenant: each message is
// claimed, handled and recorded in the database its router names, and nowhere else.

let dbs: TestDatabases;
const NAMES = ['t0', 't1', 't2'] as const;
const pools = () => Object.fromEntries(NAMES.map((n, i) => [n, dbs.pool(i)]));

beforeAll(async () => {
  dbs = await createDatabases('route', 3);
  await migrateDatabases(pools());
  for (let i = 0; i < 3; i++) {
    await dbs.pool(i).query('CREATE TABLE effects (id text NOT NULL, tenant text NOT NULL, n serial)');
  }
}, 60_000);
afterAll(async () => {
  await dbs.drop();
});

let seq = 0;
function envelope(id: string, tenant: string, extra: Partial<Envelope> = {}): Envelope {
  return {
    id,
    body: Buffer.from(JSON.stringify({ tenant, id })),
    headers: { tenant },
    source: { broker: 'kafka', queue: 'orders', partition: 0, offset: String(seq++) },
    attempt: 1,
    redelivered: false,
    ...extra,
  } as Envelope;
}
const byHeader = (e: Envelope) => e.headers.tenant as string;
const effect: Handler = async (e, ctx) => {
  await ctx.tx.query('INSERT INTO effects (id, tenant) VALUES ($1, $2)', [e.id, e.headers.tenant]);
};

async function effectsIn(i: number, consumer?: string): Promise<Map<string, number>> {
  const { rows } = await dbs
    .pool(i)
    .query<{ id: string; n: number }>(
      consumer === undefined
        ? 'SELECT id, count(*)::int AS n FROM effects GROUP BY id'
        : 'SELECT id, count(*)::int AS n FROM effects WHERE id LIKE $1 GROUP BY id',
      consumer === undefined ? [] : [`${consumer}-%`],
    );
  return new Map(rows.map((r) => [r.id, r.n]));
}
async function inboxRows(i: number, consumer: string): Promise<string[]> {
  const { rows } = await dbs
    .pool(i)
    .query<{ message_id: string }>('SELECT message_id FROM once.inbox WHERE consumer = $1 ORDER BY 1', [
      consumer,
    ]);
  return rows.map((r) => r.message_id);
}

function inbox(consumer: string, extra: Record<string, unknown> = {}): Inbox {
  return createInbox({
    databases: pools(),
    route: byHeader,
    consumer,
    handler: effect,
    logger: false,
    ...extra,
  });
}

describe('an inbox over three databases', () => {
  it('a duplicate storm over batches and single messages: each id takes effect once, in its own database only', async () => {
    const c = 'storm';
    const ib = inbox(c);
    const ids = Array.from({ length: 150 }, (_, i) => ({ id: `${c}-${i}`, tenant: NAMES[i % 3]! }));
    // Every id three times, shuffled into batches of 1 to 20 that run four at a time.
    const deliveries = [...ids, ...ids, ...ids].sort(() => Math.random() - 0.5);
    const batches: Envelope[][] = [];
    for (let at = 0; at < deliveries.length; ) {
      const n = 1 + Math.floor(Math.random() * 20);
      batches.push(deliveries.slice(at, at + n).map((d) => envelope(d.id, d.tenant)));
      at += n;
    }
    const outcomes: Outcome[] = [];
    const lanes = [0, 1, 2, 3].map(async (lane) => {
      for (let b = lane; b < batches.length; b += 4) {
        const batch = batches[b]!;
        outcomes.push(...(batch.length === 1 ? [await ib.process(batch[0]!)] : await ib.processBatch(batch)));
      }
    });
    await Promise.all(lanes);
    // Some deliveries lost a race to their twin (busy) or stopped behind it: run them again, as a broker would.
    let again = outcomes.filter((o) => o.status === 'busy' || o.status === 'not-run' || o.status === 'retry');
    for (let round = 0; again.length > 0 && round < 10; round++) {
      const next: Outcome[] = [];
      for (const o of again) next.push(await ib.process(o.envelope));
      again = next.filter((o) => o.status === 'busy' || o.status === 'not-run' || o.status === 'retry');
    }
    expect(again).toEqual([]);
    for (let i = 0; i < 3; i++) {
      const mine = ids.filter((d) => d.tenant === NAMES[i]).map((d) => d.id);
      const got = await effectsIn(i, c);
      expect([...got.keys()].sort()).toEqual([...mine].sort());
      expect([...got.values()].every((n) => n === 1)).toBe(true);
      expect(await inboxRows(i, c)).toEqual([...mine].sort());
    }
    expect(ib.databases).toEqual([...NAMES]);
    expect(ib.available).toBe(true);
  });

  it("a batch's outcomes come back in input order, each from its own database", async () => {
    const c = 'order';
    const ib = inbox(c);
    const batch = ['t2', 't0', 't1', 't0', 't2'].map((t, i) => envelope(`${c}-${i}`, t));
    const first = await ib.processBatch(batch);
    expect(first.map((o) => [o.status, o.envelope.id])).toEqual(batch.map((e) => ['processed', e.id]));
    const second = await ib.processBatch(batch);
    expect(second.map((o) => o.status)).toEqual(batch.map(() => 'duplicate'));
    expect(await inboxRows(0, c)).toEqual([`${c}-1`, `${c}-3`]);
    expect(await inboxRows(2, c)).toEqual([`${c}-0`, `${c}-4`]);
  });

  it("idOf runs once a message: the router's id is the one its database's inbox records", async () => {
    const c = 'idof';
    let calls = 0;
    const idOf = (e: Envelope) => {
      calls++;
      return `${c}-${(JSON.parse(e.body.toString()) as { id: string }).id}`;
    };
    const ib = inbox(c, { idOf });
    const batch = ['t0', 't1', 't2', 't0'].map((t, i) => envelope(`x${i}`, t));
    const got = await ib.processBatch(batch);
    expect(got.map((o) => [o.status, o.id])).toEqual(batch.map((e) => ['processed', `${c}-${e.id}`]));
    expect(await ib.process(envelope('x1', 't1'))).toMatchObject({ status: 'duplicate', id: `${c}-x1` });
    expect(calls).toBe(5);
    expect(await inboxRows(0, c)).toEqual([`${c}-x0`, `${c}-x3`]);
  });

  it('a retry in one database stops only that database: the others run on', async () => {
    const c = 'stop';
    let failOnce = true;
    const handler: Handler = async (e, ctx) => {
      if (e.id === `${c}-1` && failOnce) {
        failOnce = false;
        throw new Error('flaky');
      }
      await effect(e, ctx);
    };
    const ib = inbox(c, { handler });
    const batch = [
      envelope(`${c}-0`, 't0'),
      envelope(`${c}-1`, 't1'),
      envelope(`${c}-2`, 't1'),
      envelope(`${c}-3`, 't2'),
      envelope(`${c}-4`, 't0'),
    ];
    const got = await ib.processBatch(batch);
    expect(got.map((o) => o.status)).toEqual(['processed', 'retry', 'not-run', 'processed', 'processed']);
    expect(await effectsIn(1, c)).toEqual(new Map());
  });

  it('a message the router cannot place is failed (unroutable), names the cause, and is recorded nowhere', async () => {
    const c = 'unroutable';
    const route = (e: Envelope) => {
      const t = e.headers.tenant as string;
      if (t === 'boom') throw new Error('no tenant table entry');
      return t;
    };
    const ib = inbox(c, { route });
    const got = await ib.processBatch([
      envelope(`${c}-0`, 't0'),
      envelope(`${c}-1`, 'boom'),
      envelope(`${c}-2`, 'nowhere'),
      envelope(`${c}-3`, 't1'),
    ]);
    expect(got.map((o) => o.status)).toEqual(['processed', 'failed', 'failed', 'processed']);
    const [thrown, unknown] = [got[1]!, got[2]!];
    expect(thrown).toMatchObject({
      reason: 'unroutable',
      id: `${c}-1`,
      error: { code: ErrorCode.Unroutable },
    });
    expect(thrown.status === 'failed' && thrown.error.message).toMatch(
      /route\(\) threw .*no tenant table entry/,
    );
    expect(unknown.status === 'failed' && unknown.error.message).toMatch(
      /route\(\) gave 'nowhere' .*not one of the databases \(t0, t1, t2\)/,
    );
    for (let i = 0; i < 3; i++) {
      const { rows } = await dbs
        .pool(i)
        .query('SELECT message_id FROM once.inbox WHERE consumer = $1 AND message_id IN ($2, $3)', [
          c,
          `${c}-1`,
          `${c}-2`,
        ]);
      expect(rows).toEqual([]);
    }
    // process() answers the same way.
    const one = await ib.process(envelope(`${c}-4`, 'boom'));
    expect(one).toMatchObject({ status: 'failed', reason: 'unroutable' });
  });

  it('one id routed to a second database, or one Kafka key, is refused; an id without a usable id stays invalid-id', async () => {
    const c = 'twice';
    const ib = inbox(c);
    expect((await ib.process(envelope(`${c}-0`, 't0'))).status).toBe('processed');
    const moved = await ib.process(envelope(`${c}-0`, 't1'));
    expect(moved).toMatchObject({ status: 'failed', reason: 'unroutable' });
    expect(moved.status === 'failed' && moved.error.message).toMatch(
      /to 't1', and the same id to 't0' before/,
    );
    expect(await inboxRows(1, c)).toEqual([]);

    expect((await ib.process(envelope(`${c}-k1`, 't0', { key: 'customer-9' }))).status).toBe('processed');
    const key = await ib.process(envelope(`${c}-k2`, 't2', { key: 'customer-9' }));
    expect(key.status === 'failed' && key.error.message).toMatch(
      /key "customer-9" of "orders" to 't2', and the same key to 't0'/,
    );
    // RabbitMQ's routing key names a route, not an order: not checked.
    const amqp = { broker: 'rabbitmq', queue: 'q', delivery: '1' } as Envelope['source'];
    expect(
      (await ib.process(envelope(`${c}-r1`, 't0', { key: 'orders.created', source: amqp }))).status,
    ).toBe('processed');
    expect(
      (await ib.process(envelope(`${c}-r2`, 't1', { key: 'orders.created', source: amqp }))).status,
    ).toBe('processed');

    const noId = await ib.process(envelope('', 't0'));
    expect(noId).toMatchObject({ status: 'failed', reason: 'invalid-id' });
  });

  it('ctx.publish writes the outbox row in the routed database', async () => {
    const c = 'publish';
    const outbox = createOutbox({ pool: dbs.pool(0), destinations: ['out'] });
    const handler: Handler = async (e, ctx) => {
      await ctx.publish('out', String(e.id), { messageId: `pub-${e.id}` });
    };
    const ib = inbox(c, { handler, outbox });
    await ib.processBatch([envelope(`${c}-0`, 't1'), envelope(`${c}-1`, 't2')]);
    const rows = async (i: number) =>
      (
        await dbs
          .pool(i)
          .query<{ m: string }>(
            "SELECT message_id AS m FROM once.outbox WHERE message_id LIKE 'pub-publish-%'",
          )
      ).rows.map((r) => r.m);
    expect([await rows(0), await rows(1), await rows(2)]).toEqual([[], [`pub-${c}-0`], [`pub-${c}-1`]]);
  });

  it('one database that cannot be used holds only its own messages: the others commit, its own are neither processed nor skipped', async () => {
    const c = 'down';
    const ib = inbox(c, { connectTimeoutMs: 2000 });
    const admin = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
    await admin.connect();
    const name = dbs.names[1]!;
    // Warm the inbox up (its schema check is kept), then take database t1 away.
    await ib.process(envelope(`${c}-warm`, 't1'));
    try {
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
      const batch = ['t0', 't1', 't2', 't1', 't0'].map((t, i) => envelope(`${c}-${i}`, t));
      const got = await ib.processBatch(batch);
      expect(got.map((o) => o.status)).toEqual(['processed', 'not-run', 'processed', 'not-run', 'processed']);
      expect(got[1]).toMatchObject({ why: 'unavailable' });
      expect(ib.available).toBe(false);
      expect(ib.unavailableDatabases).toEqual(['t1']);
      await expect(ib.checkNow()).rejects.toThrow();
      // Redelivered while it is still down: still held, never a duplicate or a failure.
      const held = await ib.processBatch([batch[1]!, batch[3]!]);
      expect(held.map((o) => o.status)).toEqual(['not-run', 'not-run']);
    } finally {
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
      await admin.end();
    }
    await ib.checkNow();
    const after = await ib.processBatch(
      ['t0', 't1', 't2', 't1', 't0'].map((t, i) => envelope(`${c}-${i}`, t)),
    );
    expect(after.map((o) => o.status)).toEqual([
      'duplicate',
      'processed',
      'duplicate',
      'processed',
      'duplicate',
    ]);
    expect(ib.unavailableDatabases).toEqual([]);
    expect(await effectsIn(1, c)).toEqual(new Map([`${c}-warm`, `${c}-1`, `${c}-3`].map((id) => [id, 1])));
  });

  it('moving a tenant: held, copied, switched, released; no id processed in the old database runs again in the new one', async () => {
    const c = 'move';
    const where = new Map<string, string | typeof HOLD>([['acme', 't0']]);
    const route = (e: Envelope) => where.get(e.headers.tenant as string) ?? (e.headers.tenant as string);
    const ib = inbox(c, { route });
    const acme = (i: number) => envelope(`${c}-${i}`, 'acme');
    const first = await ib.processBatch([0, 1, 2, 3, 4].map(acme));
    expect(first.map((o) => o.status)).toEqual(Array(5).fill('processed'));

    // 1. Hold: its messages wait, unspent, and nothing is written anywhere; other tenants go on.
    where.set('acme', HOLD);
    const held = await ib.processBatch([acme(3), acme(5), envelope(`${c}-other`, 't1')]);
    expect(held.map((o) => [o.status, o.status === 'not-run' && o.why])).toEqual([
      ['not-run', 'held'],
      ['not-run', 'held'],
      ['processed', false],
    ]);
    // 2. Copy its data and its inbox rows to the new database.
    const rows = await dbs
      .pool(0)
      .query<{ id: string; tenant: string }>("SELECT id, tenant FROM effects WHERE tenant = 'acme'");
    for (const r of rows.rows)
      await dbs.pool(2).query('INSERT INTO effects (id, tenant) VALUES ($1, $2)', [r.id, r.tenant]);
    const copied = await copyInboxRows(dbs.pool(0), dbs.pool(2), { consumers: [c], batchSize: 2 });
    expect(copied).toEqual({ copied: 5, present: 0, steps: 0 });
    expect(await copyInboxRows(dbs.pool(0), dbs.pool(2), { consumers: [c] })).toEqual({
      copied: 0,
      present: 5,
      steps: 0,
    });
    // 3. Switch. Without forgetting, this process still remembers acme's ids in t0 and refuses them.
    where.set('acme', 't2');
    expect(await ib.process(acme(3))).toMatchObject({ status: 'failed', reason: 'unroutable' });
    ib.forgetRoutes('t0');
    // 4. Released: the ids processed in t0 are duplicates in t2; the held new one runs there.
    const after = await ib.processBatch([0, 1, 2, 3, 4, 5].map(acme));
    expect(after.map((o) => o.status)).toEqual([...Array(5).fill('duplicate'), 'processed']);
    const t2 = await effectsIn(2, c);
    expect([...t2.entries()].sort()).toEqual([0, 1, 2, 3, 4, 5].map((i) => [`${c}-${i}`, 1]));
    expect((await effectsIn(0, c)).get(`${c}-5`)).toBeUndefined();
  });

  it('adding a database while messages flow: the new tenant runs there from then on; listeners hear it', async () => {
    const c = 'add';
    const extra = await createDatabases('route_add', 1);
    try {
      await migrateDatabases({ t3: extra.pool(0) });
      await extra.pool(0).query('CREATE TABLE effects (id text NOT NULL, tenant text NOT NULL, n serial)');
      const ib = inbox(c);
      const heard: (string | undefined)[] = [];
      ib.on('message:processed', (e) => heard.push(e.database));
      // Messages keep flowing while the database is added.
      let stop = false;
      let sent = 0;
      const flow = (async () => {
        while (!stop) {
          const t = NAMES[sent % 3]!;
          expect((await ib.process(envelope(`${c}-${sent++}`, t))).status).toBe('processed');
        }
      })();
      await new Promise((r) => setTimeout(r, 50));
      // Before it is added, its name is unroutable.
      expect(await ib.process(envelope(`${c}-early`, 't3'))).toMatchObject({
        status: 'failed',
        reason: 'unroutable',
      });
      ib.addDatabase('t3', extra.pool(0));
      expect(ib.databases).toEqual([...NAMES, 't3']);
      const got = await ib.processBatch([
        envelope(`${c}-new1`, 't3'),
        envelope(`${c}-new2`, 't0'),
        envelope(`${c}-new3`, 't3'),
      ]);
      stop = true;
      await flow;
      expect(got.map((o) => o.status)).toEqual(['processed', 'processed', 'processed']);
      const { rows } = await extra.pool(0).query<{ id: string }>('SELECT id FROM effects ORDER BY id');
      expect(rows.map((r) => r.id)).toEqual([`${c}-new1`, `${c}-new3`]);
      expect(heard.filter((d) => d === 't3')).toHaveLength(2);
      expect(sent).toBeGreaterThan(0);
      expect(() => ib.addDatabase('t3', extra.pool(0))).toThrow(
        /database 't3' is already one of this inbox's/,
      );
      expect(() => ib.addDatabase('bad name', extra.pool(0))).toThrow(/not a database name/);
      expect(() =>
        createInbox({ pool: dbs.pool(0), consumer: c, handler: effect }).addDatabase('x', extra.pool(0)),
      ).toThrow(/this inbox has one pool/);
    } finally {
      await extra.drop();
    }
  });

  it('copyInboxRows refuses a bad batch size', async () => {
    await expect(copyInboxRows(dbs.pool(0), dbs.pool(1), { batchSize: 0 })).rejects.toThrow(
      /option 'batchSize'/,
    );
  });

  it('options: pool or databases, route with databases only, a set of good names, no library transactions', () => {
    const base = { consumer: 'opts', handler: effect };
    const p = dbs.pool(0);
    expect(() => createInbox({ ...base, pool: p, databases: { a: p }, route: () => 'a' })).toThrow(
      /option 'databases' and 'pool' are two ways to name the database: give one of them/,
    );
    expect(() => createInbox({ ...base, pool: p, route: () => 'a' })).toThrow(
      /option 'route' is for an inbox over several databases/,
    );
    expect(() => createInbox({ ...base, databases: { a: p } })).toThrow(/option 'route' must be a function/);
    expect(() => createInbox({ ...base, databases: {}, route: () => 'a' })).toThrow(
      /must name at least one database/,
    );
    expect(() => createInbox({ ...base, databases: { 'bad name': p }, route: () => 'a' })).toThrow(
      /databases\.bad name/,
    );
    expect(() => createInbox({ ...base, databases: { a: {} as pg.Pool }, route: () => 'a' })).toThrow(
      /must be a pg Pool/,
    );
    expect(() =>
      createInbox({
        ...base,
        databases: { a: p },
        route: () => 'a',
        mode: { transactions: { run: async () => undefined, query: async () => ({ rows: [] }) } as never },
      }),
    ).toThrow(/cannot be combined with mode: \{ transactions \}/);
    expect(() => createInbox({ ...base })).toThrow(/option 'pool' must be a pg Pool/);
  });
});
