import { migrate } from '@once/core';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  dropSchema,
  FaultProxy,
  freshDb,
  freshSchemaName,
  serviceUrls,
  type TestDb,
} from '../../../../test/support/index.js';
import { createSqsConsumer, type SqsConsumer } from '../../src/index.js';
import { queues, sendAll, sleep, sqsClient, unique, waitFor } from './fixtures/env.js';

// While PostgreSQL or once's schema cannot be used, the consumer receives nothing (SQS keeps the
// messages visible), reports unhealthy, and receives again once the schema checks out. start()
// does not fail for it, and nothing is dead-lettered: the default dead-letter queue
// (`<name>-dead`) stays empty.

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-dbdown');
let db: TestDb;
const cleanup: (() => Promise<void>)[] = [];

beforeAll(async () => {
  db = await freshDb('sqs_dbdown', 6);
});
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
  await q.drop();
  await db.close();
  client.destroy();
});

/** A FIFO queue and its default dead-letter queue `<name>-dead.fifo`. */
async function queuePair(name: string): Promise<{ url: string; dead: string }> {
  const url = await q.create(`${name}.fifo`, { VisibilityTimeout: '5' });
  const dead = await q.create(`${name}-dead.fifo`);
  return { url, dead };
}

function consumerOn(pool: pg.Pool, schema: string, queueUrl: string, effects: string) {
  const seen = { notRun: 0, deadLettered: 0, paused: 0, resumed: 0, received: 0 };
  const c: SqsConsumer = createSqsConsumer({
    client,
    queueUrl,
    pool,
    schema,
    waitTimeSeconds: 1,
    visibilityTimeoutS: 5,
    handler: async (e, { tx }) => {
      await tx.query(`INSERT INTO ${effects} (id, grp) VALUES ($1, $2)`, [e.id, e.key]);
    },
  });
  c.inbox.on('message:not-run', () => seen.notRun++);
  c.on('message:dead-lettered', () => seen.deadLettered++);
  c.on('consumer:paused', () => seen.paused++);
  c.on('consumer:resumed', () => seen.resumed++);
  c.on('received', (e) => {
    seen.received += e.count;
  });
  cleanup.push(() => c.stop());
  return { c, seen };
}

const send = (url: string, ids: string[]) =>
  sendAll(
    client,
    url,
    ids.map((id, i) => ({ id, body: '{}', group: `g${i % 3}`, dedup: id })),
  );

async function effectCounts(pool: pg.Pool, table: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ id: string; n: number }>(
    `SELECT id, count(*)::int AS n FROM ${table} GROUP BY id`,
  );
  return new Map(rows.map((r) => [r.id, r.n]));
}

/** Every id has exactly one effect, in send order within its group. */
async function expectOnceInOrder(pool: pg.Pool, table: string, ids: string[]): Promise<void> {
  const counts = await effectCounts(pool, table);
  for (const id of ids) expect(counts.get(id), id).toBe(1);
  const { rows } = await pool.query<{ id: string; grp: string }>(`SELECT id, grp FROM ${table} ORDER BY seq`);
  for (const g of ['g0', 'g1', 'g2']) {
    const got = rows.filter((r) => r.grp === g && ids.includes(r.id)).map((r) => r.id);
    expect(got).toEqual(ids.filter((_, i) => `g${i % 3}` === g));
  }
}

const createEffects = (pool: pg.Pool, table: string) =>
  pool.query(`CREATE TABLE IF NOT EXISTS ${table} (seq bigserial, id text NOT NULL, grp text)`);

it('a consumer started before migrate() receives nothing, dead-letters nothing, and begins once migrated', async () => {
  const schema = freshSchemaName('sqs_premigrate');
  cleanup.push(() => dropSchema(db.pool, schema));
  const { url, dead } = await queuePair(`${run}-pre`);
  const { c, seen } = consumerOn(db.pool, schema, url, `${schema}.effects`);
  await c.start();
  expect(c.health()).toMatchObject({ state: 'running', healthy: false, available: false });
  expect(c.health().lastError?.code).toBe('SCHEMA_NOT_INSTALLED');
  const ids = Array.from({ length: 12 }, (_, i) => `${url.slice(-12)}-${i}`);
  await send(url, ids);
  await sleep(2_500);
  // Nothing received: every message is still in the queue, none was handed to the inbox.
  expect(seen).toMatchObject({ received: 0, notRun: 0, deadLettered: 0 });
  expect(await q.depth(url)).toBe(12);

  await migrate(db.pool, { schema });
  await createEffects(db.pool, `${schema}.effects`);
  await waitFor(async () => (await q.depth(url)) === 0 && c.health().held === 0, 30_000, 'drained');
  await expectOnceInOrder(db.pool, `${schema}.effects`, ids);
  expect(seen).toMatchObject({ deadLettered: 0, resumed: 1 });
  expect(await q.depth(dead)).toBe(0);
  expect(c.health().healthy).toBe(true);
});

it('started while PostgreSQL refuses connections: start() resolves, nothing is received until it is back', async () => {
  const proxy = await FaultProxy.start(new URL(serviceUrls().databaseUrl).host);
  cleanup.push(() => proxy.close());
  const pool = new pg.Pool({ connectionString: proxy.url(serviceUrls().databaseUrl), max: 4 });
  pool.on('error', () => {});
  cleanup.push(() => pool.end());
  const table = `${db.schema}.effects_refused`;
  await createEffects(db.pool, table);
  const { url, dead } = await queuePair(`${run}-refused`);
  proxy.refuse(true);
  const { c, seen } = consumerOn(pool, db.schema, url, table);
  await c.start();
  expect(c.health()).toMatchObject({ state: 'running', healthy: false, available: false });
  const ids = Array.from({ length: 15 }, (_, i) => `${url.slice(-12)}-${i}`);
  await send(url, ids);
  await sleep(2_000);
  expect(seen).toMatchObject({ received: 0, notRun: 0 });
  expect(await q.depth(url)).toBe(15);

  proxy.refuse(false);
  await waitFor(async () => (await q.depth(url)) === 0 && c.health().held === 0, 30_000, 'drained');
  await expectOnceInOrder(db.pool, table, ids);
  expect(seen.deadLettered).toBe(0);
  expect(await q.depth(dead)).toBe(0);
  expect(c.health().healthy).toBe(true);
});

it('when PostgreSQL goes away mid-run the consumer stops receiving, and receives again when it is back', async () => {
  const proxy = await FaultProxy.start(new URL(serviceUrls().databaseUrl).host);
  cleanup.push(() => proxy.close());
  const pool = new pg.Pool({ connectionString: proxy.url(serviceUrls().databaseUrl), max: 4 });
  pool.on('error', () => {});
  cleanup.push(() => pool.end());
  const table = `${db.schema}.effects_mid`;
  await createEffects(db.pool, table);
  const { url, dead } = await queuePair(`${run}-mid`);
  const { c, seen } = consumerOn(pool, db.schema, url, table);
  await c.start();
  const first = Array.from({ length: 6 }, (_, i) => `${url.slice(-12)}-a${i}`);
  await send(url, first);
  await waitFor(async () => (await effectCounts(db.pool, table)).size === 6, 20_000, 'first messages');

  proxy.refuse(true);
  proxy.cutAll();
  const second = Array.from({ length: 30 }, (_, i) => `${url.slice(-12)}-b${i}`);
  await send(url, second);
  await waitFor(() => seen.paused > 0, 30_000, 'the consumer to pause');
  expect(c.health()).toMatchObject({ healthy: false, available: false });
  // Held: whatever was received when it paused goes back unrun, and so does what a receive in
  // flight then (a long poll of waitTimeSeconds, 1 s) still brings; then nothing more is received.
  await waitFor(() => c.health().held === 0, 30_000, 'held messages to go back');
  await sleep(1_500);
  await waitFor(() => c.health().held === 0, 30_000, 'held messages to go back');
  const received = seen.received;
  const notRun = seen.notRun;
  await sleep(2_500);
  expect(seen.received).toBe(received);
  expect(seen.notRun).toBe(notRun);

  proxy.refuse(false);
  await waitFor(async () => (await q.depth(url)) === 0 && c.health().held === 0, 60_000, 'drained');
  await expectOnceInOrder(db.pool, table, [...first, ...second]);
  expect(seen.deadLettered).toBe(0);
  expect(await q.depth(dead)).toBe(0);
  expect(c.health().healthy).toBe(true);
});
