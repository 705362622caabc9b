import { migrate } from '@once/core';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  dropSchema,
  FaultProxy,
  freshDb,
  freshSchemaName,
  serviceUrls,
} from '../../../../test/support/index.js';
import { createRabbitConsumer, type RabbitConsumer } from '../../src/index.js';
import { AMQP_URL, amqpAdmin, closeConnectionsNamed, unique, waitFor } from './fixtures/env.js';

// While PostgreSQL or once's schema cannot be used, the consumer cancels its AMQP consumer (the
// broker keeps the messages ready), reports unhealthy, and consumes again once the schema checks
// out. start() does not fail for it.

let db: Awaited<ReturnType<typeof freshDb>>;
let admin: Awaited<ReturnType<typeof amqpAdmin>>;
const run = unique('rmq-dbdown');
const cleanup: (() => Promise<void>)[] = [];

beforeAll(async () => {
  db = await freshDb('rmq_dbdown', 6);
  admin = await amqpAdmin(run);
});
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
  await admin.close();
  await db.close();
});

function consumerOn(pool: pg.Pool, schema: string, queue: string, effects: string) {
  const seen = { notRun: 0, deadLettered: 0, paused: 0, resumed: 0 };
  const c: RabbitConsumer = createRabbitConsumer({
    url: AMQP_URL,
    queue,
    pool,
    schema,
    prefetch: 10,
    socketOptions: { clientProperties: { connection_name: `${run}-${queue}` } },
    handler: async (e, { tx }) => {
      await tx.query(`INSERT INTO ${effects} (id) VALUES ($1)`, [e.id]);
    },
  });
  c.inbox.on('message:not-run', () => seen.notRun++);
  c.on('message:dead-lettered', () => seen.deadLettered++);
  c.on('consumer:paused', () => seen.paused++);
  c.on('consumer:resumed', () => seen.resumed++);
  cleanup.push(async () => {
    await c.stop();
    await admin.dropTopology(queue);
  });
  return { c, seen };
}

async function publish(queue: string, ids: string[]): Promise<void> {
  for (const id of ids) await admin.publish(queue, id, { messageId: id });
}

it('a consumer started before migrate() takes nothing, dead-letters nothing, and begins once migrated', async () => {
  const schema = freshSchemaName('rmq_premigrate');
  cleanup.push(() => dropSchema(db.pool, schema));
  const queue = unique(`${run}-pre`);
  const { c, seen } = consumerOn(db.pool, schema, queue, `${schema}.effects`);
  await c.start();
  expect(c.health()).toMatchObject({ state: 'running', healthy: false, available: false });
  expect(c.health().lastError?.code).toBe('SCHEMA_NOT_INSTALLED');
  const ids = Array.from({ length: 12 }, (_, i) => `${queue}-${i}`);
  await publish(queue, ids);
  await new Promise((r) => setTimeout(r, 1_500));
  // Not consumed: the broker still holds every message ready, none was handed to the inbox.
  expect(await admin.count(queue)).toBe(12);
  expect(seen).toMatchObject({ notRun: 0, deadLettered: 0 });

  await migrate(db.pool, { schema });
  await db.pool.query(`CREATE TABLE ${schema}.effects (id text NOT NULL)`);
  await waitFor(
    async () => (await admin.count(queue)) === 0 && c.health().unsettled === 0,
    30_000,
    'drained',
  );
  const { rows } = await db.pool.query<{ id: string; n: number }>(
    `SELECT id, count(*)::int AS n FROM ${schema}.effects GROUP BY id`,
  );
  expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
  expect(rows.every((r) => r.n === 1)).toBe(true);
  expect(seen.deadLettered).toBe(0);
  expect(await admin.count(`${queue}.dead`)).toBe(0);
  expect(c.health().healthy).toBe(true);
});

it('when PostgreSQL goes away the consumer stops consuming, and consumes again when it is back', async () => {
  const proxy = await FaultProxy.start(new URL(serviceUrls().databaseUrl).host);
  cleanup.push(() => proxy.close());
  const pool = new pg.Pool({ connectionString: proxy.url(serviceUrls().databaseUrl), max: 4 });
  pool.on('error', () => {});
  cleanup.push(() => pool.end());
  const queue = unique(`${run}-mid`);
  const { c, seen } = consumerOn(pool, db.schema, queue, db.effects);
  await c.start();
  const first = Array.from({ length: 5 }, (_, i) => `${queue}-a${i}`);
  await publish(queue, first);
  await waitFor(async () => (await db.counts()).has(first[4]!), 20_000, 'first batch');

  proxy.refuse(true);
  proxy.cutAll();
  const second = Array.from({ length: 30 }, (_, i) => `${queue}-b${i}`);
  await publish(queue, second);
  await waitFor(async () => seen.paused > 0, 30_000, 'the consumer to pause');
  expect(c.health()).toMatchObject({ healthy: false, available: false });
  // Cancelled: the broker keeps what was not yet handed over, and nothing is retried meanwhile.
  await new Promise((r) => setTimeout(r, 1_000));
  const notRun = seen.notRun;
  await new Promise((r) => setTimeout(r, 2_000));
  expect(seen.notRun).toBe(notRun);
  expect(c.health().active).toBe(0);

  proxy.refuse(false);
  await waitFor(
    async () => {
      const n = await db.counts();
      return second.every((id) => n.has(id));
    },
    60_000,
    'second batch',
  );
  await waitFor(
    async () => (await admin.count(queue)) === 0 && c.health().unsettled === 0,
    30_000,
    'drained',
  );
  const counts = await db.counts();
  for (const id of [...first, ...second]) expect(counts.get(id)).toBe(1);
  expect(seen.deadLettered).toBe(0);
  expect(c.health().healthy).toBe(true);
});

it('a connection lost while the database is down comes back without consuming, and consumes once the database is back', async () => {
  const proxy = await FaultProxy.start(new URL(serviceUrls().databaseUrl).host);
  cleanup.push(() => proxy.close());
  const pool = new pg.Pool({ connectionString: proxy.url(serviceUrls().databaseUrl), max: 4 });
  pool.on('error', () => {});
  cleanup.push(() => pool.end());
  proxy.refuse(true);
  const queue = unique(`${run}-recon`);
  const { c, seen } = consumerOn(pool, db.schema, queue, db.effects);
  let connected = 0;
  c.on('connected', () => connected++);
  await c.start();
  expect(c.health()).toMatchObject({ healthy: false, available: false });
  const ids = Array.from({ length: 8 }, (_, i) => `${queue}-${i}`);
  await publish(queue, ids);

  expect(await closeConnectionsNamed(`${run}-${queue}`)).toBeGreaterThan(0);
  await waitFor(() => connected === 2 && c.state === 'running', 30_000, 'the reconnect');
  await new Promise((r) => setTimeout(r, 1_000));
  // Reconnected, and still taking nothing: the database is down.
  expect(await admin.count(queue)).toBe(8);
  expect(seen.notRun).toBe(0);

  proxy.refuse(false);
  await waitFor(
    async () => {
      const n = await db.counts();
      return ids.every((id) => n.has(id));
    },
    30_000,
    'every message',
  );
  const counts = await db.counts();
  for (const id of ids) expect(counts.get(id)).toBe(1);
  expect(seen.deadLettered).toBe(0);
});
