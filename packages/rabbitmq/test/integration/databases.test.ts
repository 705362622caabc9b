import { fileURLToPath } from 'node:url';
import { type Envelope, migrateDatabases, type Tx } from '@once/core';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createDatabases,
  killAllChildren,
  serviceEnv,
  startChild,
  type TestDatabases,
} from '../../../../test/support/index.js';
import { createRabbitConsumer, type RabbitConsumer } from '../../src/index.js';
import { AMQP_URL, amqpAdmin, recordOf, sleep, unique, waitFor } from './fixtures/env.js';

// One RabbitMQ consumer over three real databases, a database per tenant: the `tenant` header
// names the database. Each message is claimed, handled and recorded in its own database only;
// one database down holds only its own messages (each given back through the retry tier,
// unspent), and the other two settle meanwhile.

const WORKER = fileURLToPath(new URL('./fixtures/routed-worker.mjs', import.meta.url));
const NAMES = ['t0', 't1', 't2'] as const;
let dbs: TestDatabases;
let admin: Awaited<ReturnType<typeof amqpAdmin>>;
const run = unique('rmq-route');
const queues: string[] = [];
const consumers: RabbitConsumer[] = [];

const pools = () => Object.fromEntries(NAMES.map((n, i) => [n, dbs.pool(i)]));
const byTenant = (e: Envelope): string => {
  const t = e.headers.tenant;
  if (t === 'boom') throw new Error('no tenant table entry');
  return t ?? '';
};

beforeAll(async () => {
  dbs = await createDatabases('rmq_route', 3);
  await migrateDatabases(pools());
  for (let i = 0; i < 3; i++) {
    await dbs
      .pool(i)
      .query(
        'CREATE TABLE effects (id text NOT NULL, tenant text NOT NULL, attempt int NOT NULL, xact bigint NOT NULL DEFAULT txid_current())',
      );
  }
  admin = await amqpAdmin(run);
}, 60_000);
afterAll(async () => {
  await killAllChildren();
  for (const c of consumers) await c.stop().catch(() => {});
  for (const q of queues) await admin.dropTopology(q);
  await admin.close();
  await dbs.drop();
});

async function queueFor(name: string): Promise<string> {
  const queue = unique(`${run}-${name}`);
  queues.push(queue);
  await admin.ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  return queue;
}

/** Publishes each delivery with its id as messageId and its tenant as a header. */
async function publish(queue: string, deliveries: { id: string; tenant: string }[]): Promise<void> {
  await admin.publishMany(
    queue,
    deliveries.map((d) => ({ body: d.id, options: { messageId: d.id, headers: { tenant: d.tenant } } })),
  );
}

function consumer(queue: string, patch: Record<string, unknown> = {}) {
  const seen = { deadLettered: 0, paused: 0, notRun: 0, settled: [] as (string | undefined)[][] };
  const c = createRabbitConsumer({
    url: AMQP_URL,
    queue,
    databases: pools(),
    route: byTenant,
    prefetch: 50,
    concurrency: 4,
    connectTimeoutMs: 2_000,
    logger: false,
    socketOptions: { clientProperties: { connection_name: `${queue}-consumer` } },
    handler: async (e, { tx }) => {
      await effect(e, tx);
    },
    ...patch,
  });
  c.on('message:dead-lettered', () => seen.deadLettered++);
  c.on('consumer:paused', () => seen.paused++);
  c.on('settled', (e) => seen.settled.push([e.id, e.status, e.plan]));
  c.inbox.on('message:not-run', (e) => {
    if (e.why === 'unavailable') seen.notRun++;
  });
  consumers.push(c);
  return { c, seen };
}

/** id → number of effects, in database `i`, for the ids starting with `prefix`. */
async function effectsIn(i: number, prefix: string): Promise<Map<string, number>> {
  const { rows } = await dbs
    .pool(i)
    .query<{ id: string; n: number }>(
      'SELECT id, count(*)::int AS n FROM effects WHERE id LIKE $1 GROUP BY id',
      [`${prefix}%`],
    );
  return new Map(rows.map((r) => [r.id, r.n]));
}
async function inboxIds(i: number, prefix: string): Promise<string[]> {
  const { rows } = await dbs
    .pool(i)
    .query<{ id: string }>('SELECT message_id AS id FROM once.inbox WHERE message_id LIKE $1 ORDER BY 1', [
      `${prefix}%`,
    ]);
  return rows.map((r) => r.id);
}

/** Every id of `ids` took effect once in its own database, nowhere else, and is recorded there only. */
async function expectOncePerDatabase(prefix: string, ids: { id: string; tenant: string }[]) {
  for (let i = 0; i < 3; i++) {
    const mine = ids
      .filter((d) => d.tenant === NAMES[i])
      .map((d) => d.id)
      .sort();
    const got = await effectsIn(i, prefix);
    expect([...got.keys()].sort()).toEqual(mine);
    expect([...got.values()].filter((n) => n !== 1)).toEqual([]);
    expect(await inboxIds(i, prefix)).toEqual(mine);
  }
}

async function total(prefix: string): Promise<number> {
  let n = 0;
  for (let i = 0; i < 3; i++) n += (await effectsIn(i, prefix)).size;
  return n;
}

/** The handler's write: one effects row in the routed database, in the message's transaction. */
const effect = (e: Envelope, tx: Tx) =>
  tx.query('INSERT INTO effects (id, tenant, attempt) VALUES ($1, $2, $3)', [
    e.id,
    e.headers.tenant,
    e.attempt,
  ]);

const tenantsOf = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i}`, tenant: NAMES[i % 3]! }));

it('a duplicate storm over three tenants: each id takes effect once, in its own database only', async () => {
  const queue = await queueFor('storm');
  const prefix = `${queue}-`;
  const ids = tenantsOf(queue, 300);
  // Each id two or three times, shuffled.
  const deliveries = ids
    .flatMap((d, i) => (i % 2 === 0 ? [d, d, d] : [d, d]))
    .sort(() => Math.random() - 0.5);
  await publish(queue, deliveries);
  const { c, seen } = consumer(queue, { batch: true, batchSize: 10 });
  await c.start();
  await waitFor(async () => (await total(prefix)) === ids.length, 60_000, 'all 300 effects');
  await waitFor(
    async () => (await admin.count(queue)) === 0 && c.health().unsettled === 0,
    30_000,
    'queue drained',
  );
  await expectOncePerDatabase(prefix, ids);
  expect(seen.deadLettered).toBe(0);
  expect(await admin.count(`${queue}.dead`)).toBe(0);
  expect(seen.settled.filter(([, status]) => status === 'duplicate').length).toBeGreaterThan(0);
  await c.stop();
});

it('SIGKILLed at random moments across three databases, restarted: each id takes effect once in its database', async () => {
  const queue = await queueFor('kill');
  const prefix = `${queue}-`;
  const ids = tenantsOf(queue, 1200);
  await publish(queue, ids);
  const child = startChild({
    script: WORKER,
    env: {
      QUEUE: queue,
      DATABASE_URLS: dbs.urls.join(','),
      PREFETCH: '50',
      CONCURRENCY: '4',
      BATCH: '1',
      DELAY_MS: '30',
    },
  });
  let left = 0;
  for (let k = 0; k < 4; k++) {
    await child.waitForLine(
      (l) => (l.json as { ready?: boolean } | undefined)?.ready === true && l.run === child.runs - 1,
      30_000,
    );
    await child.killAfterRandom(200, 900);
    left = ids.length - (await total(prefix));
    child.start();
  }
  // The last kill still found work to do (a kill after the end would prove nothing).
  expect(left).toBeGreaterThan(0);
  await waitFor(async () => (await total(prefix)) === ids.length, 90_000, 'all 1200 effects');
  await waitFor(async () => (await admin.count(queue)) === 0, 30_000, 'queue drained');
  await child.kill();
  expect(child.runs).toBe(5);
  await expectOncePerDatabase(prefix, ids);
  expect(child.lines.filter((l) => (l.json as { deadLettered?: string })?.deadLettered)).toEqual([]);
  expect(await admin.count(`${queue}.dead`)).toBe(0);
});

it('a message the router cannot place is dead-lettered as unroutable and recorded nowhere; the consumer goes on', async () => {
  const queue = await queueFor('unroutable');
  const prefix = `${queue}-`;
  const good = tenantsOf(queue, 6);
  const bad = [
    { id: `${queue}-boom`, tenant: 'boom' },
    { id: `${queue}-nowhere`, tenant: 'nowhere' },
  ];
  await publish(queue, [good[0]!, bad[0]!, good[1]!, good[2]!, bad[1]!, ...good.slice(3)]);
  const { c, seen } = consumer(queue);
  await c.start();
  await waitFor(
    async () => (await total(prefix)) === good.length && (await admin.count(`${queue}.dead`)) === 2,
    30_000,
    'six effects and two dead letters',
  );
  const dead = await admin.drain(`${queue}.dead`);
  const records = new Map(dead.map((m) => [String(m.properties.messageId), recordOf(m)]));
  expect(records.get(bad[0]!.id)).toMatchObject({
    reason: 'unroutable',
    error: { code: 'UNROUTABLE', message: expect.stringMatching(/route\(\) threw .*no tenant table entry/) },
  });
  expect(records.get(bad[1]!.id)).toMatchObject({
    reason: 'unroutable',
    error: { code: 'UNROUTABLE', message: expect.stringMatching(/route\(\) gave 'nowhere'/) },
  });
  expect(seen.deadLettered).toBe(2);
  await expectOncePerDatabase(prefix, good);
  for (let i = 0; i < 3; i++) {
    const { rows } = await dbs
      .pool(i)
      .query('SELECT 1 FROM once.inbox WHERE message_id = ANY($1)', [bad.map((b) => b.id)]);
    expect(rows).toEqual([]);
  }
  await c.stop();
});

it('one database down for 60 s: the other two settle meanwhile, nothing is dead-lettered, its own messages wait unspent and take effect once after', async () => {
  const queue = await queueFor('down');
  const prefix = `${queue}-`;
  const down = dbs.names[1]!;
  const sql = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
  await sql.connect();
  // The first delivery is slow, so the twelve behind it gather in the prefetch window and run as
  // ONE batch that mixes the three tenants while t1 is down.
  const gate = { id: `${queue}-gate`, tenant: 't0' };
  const mixed = Array.from({ length: 12 }, (_, i) => ({ id: `${queue}-m${i}`, tenant: NAMES[i % 3]! }));
  const { c, seen } = consumer(queue, {
    batch: true,
    concurrency: 1,
    prefetch: 40,
    handler: async (e: Envelope, { tx }: { tx: Tx }) => {
      if (e.id === gate.id) await sleep(500);
      await effect(e, tx);
    },
  });
  const all = [gate, ...mixed];
  const started = Date.now();
  try {
    await sql.query(`ALTER DATABASE "${down}" ALLOW_CONNECTIONS false`);
    await sql.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [down]);
    await publish(queue, all);
    await c.start();
    // The mixed batch: t0 and t2 commit, t1's come back not-run (unavailable), neither acked as
    // done nor skipped as duplicates.
    await waitFor(
      async () => (await effectsIn(0, prefix)).size + (await effectsIn(2, prefix)).size === 9,
      20_000,
      'the mixed batch of t0 and t2',
    );
    await waitFor(() => seen.notRun >= 4, 10_000, "t1's four held");
    const t1 = (id: string | undefined) => all.some((d) => d.id === id && d.tenant === 't1');
    expect(
      seen.settled.filter(([id, status]) => (t1(id) && status !== 'not-run') || status === 'duplicate'),
    ).toEqual([]);
    expect(
      seen.settled.filter(([, status]) => status === 'not-run').every(([, , plan]) => plan === 'retry'),
    ).toBe(true);
    // One batch: one transaction in t0 for its four, one in t2 for its four.
    for (const [i, t] of [
      [0, 't0'],
      [2, 't2'],
    ] as const) {
      const { rows } = await dbs
        .pool(i)
        .query<{ n: number }>('SELECT count(DISTINCT xact)::int AS n FROM effects WHERE id = ANY($1)', [
          mixed.filter((d) => d.tenant === t).map((d) => d.id),
        ]);
      expect(rows[0]!.n).toBe(1);
    }

    // Messages for all three keep arriving while t1 stays down.
    let n = 0;
    while (Date.now() - started < 57_000) {
      const burst = Array.from({ length: 6 }, () => {
        const i = n++;
        return { id: `${queue}-s${i}`, tenant: NAMES[i % 3]! };
      });
      all.push(...burst);
      await publish(queue, burst);
      await sleep(1_000);
    }
    // The other two databases settle everything while t1 is still down.
    const others = all.filter((d) => d.tenant !== 't1');
    await waitFor(
      async () => (await effectsIn(0, prefix)).size + (await effectsIn(2, prefix)).size === others.length,
      15_000,
      't0 and t2 settled while t1 is down',
    );
    for (const i of [0, 2]) {
      const got = await effectsIn(i, prefix);
      expect([...got.values()].filter((v) => v !== 1)).toEqual([]);
    }
    // t1's messages are still with the broker (work queue, retry tier or in hand), none settled
    // as done, none dead-lettered, and the consumer as a whole never paused.
    expect(c.inbox.unavailableDatabases).toEqual(['t1']);
    expect(
      seen.settled.filter(([id, status]) => (t1(id) && status !== 'not-run') || status === 'duplicate'),
    ).toEqual([]);
    expect(seen.deadLettered).toBe(0);
    expect(seen.paused).toBe(0);
    expect(await admin.count(`${queue}.dead`)).toBe(0);
    // Down for 60 s in all.
    while (Date.now() - started < 60_000) await sleep(100);
  } finally {
    await sql.query(`ALTER DATABASE "${down}" ALLOW_CONNECTIONS true`);
    await sql.end();
  }
  expect(Date.now() - started).toBeGreaterThanOrEqual(60_000);
  // Back: every t1 message takes effect once, in t1 only.
  await waitFor(async () => (await total(prefix)) === all.length, 30_000, 'every message after restore');
  await waitFor(
    async () => c.health().unsettled === 0 && (await admin.count(queue)) === 0,
    20_000,
    'queue drained',
  );
  await expectOncePerDatabase(prefix, all);
  // Held, never spent: each t1 message ran at last as attempt 1, however often it was given back.
  const { rows } = await dbs
    .pool(1)
    .query<{ n: number }>('SELECT count(*)::int AS n FROM effects WHERE id LIKE $1 AND attempt <> 1', [
      `${prefix}%`,
    ]);
  expect(rows[0]!.n).toBe(0);
  expect(seen.deadLettered).toBe(0);
  expect(await admin.count(`${queue}.dead`)).toBe(0);
  await c.stop();
}, 140_000);
