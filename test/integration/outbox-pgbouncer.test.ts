import { createOutbox, createRelay, migrate, type Relay } from '@once/core';
import {
  createRabbitConsumer,
  createRabbitPublisher,
  type RabbitConsumer,
  type RabbitPublisher,
} from '@once/rabbitmq';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTestPool,
  dropSchema,
  freshSchemaName,
  serviceUrls,
  uniqueName,
  waitFor,
} from '../support/index.js';
import { type PgBouncer, startPgBouncer } from '../support/pgbouncer.js';
import { amqpAdmin } from './fixtures/outbox-env.js';

// The outbox relay behind PgBouncer in transaction pooling mode (a private pgbouncer, its own
// port and config, stopped afterwards). There each transaction may run on any server connection,
// so the session that ran LISTEN is not the relay's: LISTEN succeeds and no notification ever
// arrives. The relay checks that at start, says so (a warning, `health().pollingOnly`), and finds
// rows by polling; every row is still published. A once consumer behind the same PgBouncer
// (its claims, effects and settling are transactions, with SET LOCAL only) records each effect
// once. A relay on PostgreSQL itself passes the check.

const N = 50;
const POLL_MS = 200;
let bouncer: PgBouncer;
let direct: pg.Pool;
let rabbit: Awaited<ReturnType<typeof amqpAdmin>>;
const schema = freshSchemaName('pgbouncer');
const exchange = uniqueName('pgbouncer-outbox');
const queue = `${exchange}-q`;
const onceQueue = `${exchange}-once`;
const consumers: RabbitConsumer[] = [];
const relays: Relay[] = [];
const publishers: RabbitPublisher[] = [];
const pools: pg.Pool[] = [];

beforeAll(async () => {
  bouncer = await startPgBouncer({ poolMode: 'transaction', poolSize: 4 });
  direct = createTestPool();
  await migrate(direct, { schema });
  rabbit = await amqpAdmin();
  const ch = await rabbit.conn.createChannel();
  await ch.assertExchange(exchange, 'fanout', { durable: false });
  await ch.assertQueue(queue, { durable: false });
  await ch.bindQueue(queue, exchange, '');
  await ch.close();
});

afterAll(async () => {
  for (const c of consumers) await c.stop();
  for (const r of relays) await r.stop();
  for (const p of publishers) await p.stop();
  for (const p of pools) await p.end();
  const tiers = [1000, 10000, 60000].map((t) => `${onceQueue}.retry.${t}ms`);
  await rabbit?.deleteQueues([queue, onceQueue, `${onceQueue}.dead`, ...tiers]);
  await rabbit?.deleteExchanges([exchange, `${onceQueue}.dlx`]);
  await rabbit?.close();
  await bouncer?.stop();
  if (direct) {
    await dropSchema(direct, schema);
    await direct.end();
  }
});

function relayOn(pool: pg.Pool, warnings: string[]): Relay {
  const publisher = createRabbitPublisher({ url: serviceUrls().amqpUrl });
  publishers.push(publisher);
  const relay = createRelay({
    pool,
    schema,
    publishers: { [exchange]: publisher },
    pollIntervalMs: POLL_MS,
    logger: {
      debug() {},
      info() {},
      warn: (_fields: unknown, message: string) => void warnings.push(message),
      error: (_fields: unknown, message: string) => void warnings.push(message),
    },
  });
  relays.push(relay);
  return relay;
}

it('through PgBouncer in transaction mode: LISTEN is found deaf, the relay polls and publishes every row; a consumer behind it records each once', async () => {
  const bounced = new pg.Pool({ connectionString: bouncer.url, max: 4 });
  bounced.on('error', () => {});
  pools.push(bounced);
  await direct.query(`CREATE TABLE ${schema}.effects (id text PRIMARY KEY, n integer NOT NULL)`);
  const consumer = createRabbitConsumer({
    url: serviceUrls().amqpUrl,
    queue: onceQueue,
    pool: bounced,
    schema,
    consumer: 'behind-pgbouncer',
    batch: true,
    prefetch: 20,
    logger: false,
    handler: async (envelope, { tx }) => {
      const { n } = JSON.parse(envelope.body.toString()) as { n: number };
      await tx.query(`INSERT INTO ${schema}.effects (id, n) VALUES ($1, $2)`, [envelope.id, n]);
    },
  });
  consumers.push(consumer);
  await consumer.start();
  const ch = await rabbit.conn.createChannel();
  await ch.bindQueue(onceQueue, exchange, '');
  await ch.close();
  const warnings: string[] = [];
  const relay = relayOn(bounced, warnings);
  await relay.start();
  expect(relay.health()).toMatchObject({ running: true, listening: false, pollingOnly: true });
  expect(warnings.join('\n')).toMatch(/LISTEN hears no notifications/);

  // The application behind the same PgBouncer: each row in its own transaction, then the wake-up
  // (a NOTIFY, which reaches no relay here).
  const outbox = createOutbox({ pool: bounced, schema, destinations: [exchange] });
  const t0 = Date.now();
  for (let i = 0; i < N; i++) {
    const client = await bounced.connect();
    try {
      await client.query('BEGIN');
      await outbox.enqueue(client, exchange, { n: i }, { key: `k${i % 7}` });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    outbox.wake();
  }
  await waitFor(`${N} messages in ${queue}`, async () => (await rabbit.count(queue)) >= N, 60_000);
  const ms = Date.now() - t0;
  console.log(
    `pgbouncer transaction mode: ${N} rows published ${ms} ms after the first enqueue (poll ${POLL_MS} ms)`,
  );
  expect(await rabbit.count(queue)).toBe(N);
  const { rows } = await direct.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM ${schema}.outbox GROUP BY status`,
  );
  expect(rows).toEqual([{ status: 'sent', n: N }]);
  expect(relay.health().lastError).toBeUndefined();

  // Every message again, as a relay that died before marking them sent would re-send them: the
  // consumer behind PgBouncer finds each claim and writes nothing twice.
  const again = await rabbit.drain(queue);
  expect(again).toHaveLength(N);
  const raw = await rabbit.conn.createConfirmChannel();
  for (const m of again) raw.publish(exchange, '', m.content, { messageId: m.properties.messageId });
  await raw.waitForConfirms();
  await raw.close();
  await waitFor(
    'the consumer to take every delivery',
    async () => (await rabbit.count(onceQueue)) === 0,
    60_000,
  );
  await waitFor(
    `${N} effects`,
    async () => (await direct.query(`SELECT count(*)::int AS n FROM ${schema}.effects`)).rows[0].n >= N,
    60_000,
  );
  await consumer.stop();
  expect((await direct.query(`SELECT count(*)::int AS n FROM ${schema}.effects`)).rows[0].n).toBe(N);
  const inbox = await direct.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM ${schema}.inbox WHERE consumer = 'behind-pgbouncer' GROUP BY status`,
  );
  expect(inbox.rows).toEqual([{ status: 'done', n: N }]);
  expect(await rabbit.count(onceQueue), 'every delivery, re-sends included, settled').toBe(0);
  expect(await rabbit.count(`${onceQueue}.dead`)).toBe(0);
  await rabbit.drain(queue);
});

it('on PostgreSQL itself the LISTEN check passes: the relay listens', async () => {
  // With the pool settings docs/operations.md asks for, so that no warning at all is expected.
  const pool = createTestPool({ keepAlive: true, connectionTimeoutMillis: 10_000 });
  pools.push(pool);
  const warnings: string[] = [];
  const relay = relayOn(pool, warnings);
  await relay.start();
  expect(relay.health()).toMatchObject({ listening: true, pollingOnly: false });
  expect(warnings).toEqual([]);
});

it('migrate() through PgBouncer in transaction mode: three at once, one schema at the latest version', async () => {
  const bounced = new pg.Pool({ connectionString: bouncer.url, max: 4 });
  bounced.on('error', () => {});
  pools.push(bounced);
  const other = freshSchemaName('pgbouncer_migrate');
  try {
    await Promise.all([1, 2, 3].map(() => migrate(bounced, { schema: other })));
    const { rows } = await direct.query<{ v: number }>(
      `SELECT max(version)::int AS v FROM ${other}.schema_version`,
    );
    const { rows: main } = await direct.query<{ v: number }>(
      `SELECT max(version)::int AS v FROM ${schema}.schema_version`,
    );
    expect(rows[0]!.v).toBe(main[0]!.v);
  } finally {
    await dropSchema(direct, other);
  }
});
