import { createOutbox, createRelay, type Relay } from '@once/core';
import {
  createRabbitConsumer,
  createRabbitPublisher,
  type RabbitConsumer,
  type RabbitPublisher,
} from '@once/rabbitmq';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { serviceUrls, uniqueName } from '../support/index.js';
import {
  amqpAdmin,
  createTestPool,
  dropServiceDbs,
  SCALE,
  type ServiceDb,
  serviceDb,
  waitFor,
} from './fixtures/outbox-env.js';

// Two relays on one outbox, publishing to RabbitMQ: SKIP LOCKED keeps them off each other's rows,
// and "only the oldest pending row of a key is eligible" keeps a key's rows in order even though
// either relay may publish the next one. The exchange fans out to a raw queue (every delivery, in
// broker order: the ledger of deliveries) and to a once consumer's queue (its inbox would report a
// row published twice as a duplicate).

const N = Math.round(1_500 * SCALE);
const KEYS = 20;

let pool: pg.Pool;
let rabbit: Awaited<ReturnType<typeof amqpAdmin>>;
const dbs: ServiceDb[] = [];
const relays: Relay[] = [];
const publishers: RabbitPublisher[] = [];
const consumers: RabbitConsumer[] = [];
const exchange = uniqueName('outbox-relays');
const rawQueue = `${exchange}-raw`;
const onceQueue = `${exchange}-once`;

beforeAll(async () => {
  pool = createTestPool({ max: 8 });
  rabbit = await amqpAdmin();
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  for (const r of relays) await r.stop();
  for (const p of publishers) await p.stop();
  const tiers = [1000, 10000, 60000].map((t) => `${onceQueue}.retry.${t}ms`);
  await rabbit.deleteQueues([rawQueue, onceQueue, `${onceQueue}.dead`, `${onceQueue}.quarantine`, ...tiers]);
  await rabbit.deleteExchanges([exchange, `${onceQueue}.dlx`]);
  await rabbit.close();
  await dropServiceDbs(pool, dbs);
  await pool.end();
});

interface Body {
  id: string;
  key: string;
  n: number;
}

it(`two relays publish ${N} rows over ${KEYS} keys: each row once, each key in order`, {
  timeout: 180_000,
}, async () => {
  const db = await serviceDb(pool, 'outbox_relays');
  dbs.push(db);
  const url = serviceUrls().amqpUrl;

  // Downstream: a once consumer (one channel, concurrency 1: the queue's order) and a raw queue.
  let duplicates = 0;
  const consumer = createRabbitConsumer({
    url,
    queue: onceQueue,
    pool,
    schema: db.schema,
    consumer: 'downstream',
    handler: async (envelope, { tx }) => {
      const body = JSON.parse(envelope.body.toString()) as Body;
      await db.ledger.record(tx, { messageId: body.id, key: body.key, payload: envelope.id ?? '' });
    },
  });
  consumer.inbox.on('message:duplicate', () => duplicates++);
  consumers.push(consumer);
  await consumer.start();
  const setup = await rabbit.conn.createChannel();
  await setup.assertExchange(exchange, 'fanout', { durable: true });
  await setup.assertQueue(rawQueue, { durable: true });
  await setup.bindQueue(rawQueue, exchange, '');
  await setup.bindQueue(onceQueue, exchange, '');
  await setup.close();

  const outbox = createOutbox({ pool, schema: db.schema, destinations: [exchange] });
  const ids = Array.from({ length: N }, (_, i) => `${exchange}-${i}`);
  const enqueue = async (from: number, to: number) => {
    for (let i = from; i < to; i += 100) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        for (let j = i; j < Math.min(i + 100, to); j++) {
          const key = `k${j % KEYS}`;
          await outbox.enqueue(client, exchange, { id: ids[j]!, key, n: j }, { key });
        }
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      outbox.wake();
    }
  };
  // Half as a backlog, half while both relays run.
  await enqueue(0, N / 2);
  for (let r = 0; r < 2; r++) {
    const publisher = createRabbitPublisher({ url });
    publishers.push(publisher);
    // A batch smaller than the number of keys: both relays find eligible rows in every round.
    const relay = createRelay({
      pool,
      schema: db.schema,
      publishers: { [exchange]: publisher },
      batchSize: 8,
      pollIntervalMs: 100,
    });
    relays.push(relay);
    await relay.start();
  }
  await enqueue(N / 2, N);
  await waitFor('every row sent', async () => (await db.outboxCounts()).sent === N, 150_000);
  await waitFor(
    'the raw queue to hold every message',
    async () => (await rabbit.count(rawQueue)) >= N,
    30_000,
  );
  await waitFor(
    'the once consumer to record every message',
    async () => (await db.distinctEffects()) === N,
    60_000,
  );

  // The ledger of deliveries: each outbox row reached the broker once, and each key in order.
  const raw = await rabbit.drain(rawQueue);
  const delivered = raw.map((m) => ({
    messageId: m.properties.messageId as string,
    body: JSON.parse(m.content.toString()) as Body,
  }));
  const perRow = new Map<string, number>();
  for (const d of delivered) perRow.set(d.messageId, (perRow.get(d.messageId) ?? 0) + 1);
  expect(delivered.length).toBe(N);
  expect([...perRow.values()].filter((n) => n > 1)).toEqual([]);
  const lastOfKey = new Map<string, number>();
  const outOfOrder: string[] = [];
  for (const { body } of delivered) {
    if ((lastOfKey.get(body.key) ?? -1) > body.n) outOfOrder.push(`${body.key}:${body.n}`);
    lastOfKey.set(body.key, body.n);
  }
  expect(outOfOrder).toEqual([]);

  // The once consumer: no duplicate ever arrived, one effect per message, in order per key.
  const verdict = await db.ledger.check({ expectedIds: ids, checkOrderPerKey: true });
  expect({
    lost: verdict.lost.length,
    duplicated: verdict.duplicated,
    order: verdict.orderViolations,
  }).toEqual({
    lost: 0,
    duplicated: [],
    order: [],
  });
  expect(duplicates).toBe(0);
  // Both relays took part.
  const published = relays.map((r) => r.health().published);
  console.log(`[outbox-relays] published per relay: ${published.join(' + ')} = ${N}`);
  expect(published.every((n) => n > 0)).toBe(true);
  expect(published[0]! + published[1]!).toBe(N);
  expect(await db.outboxCounts()).toEqual({ pending: 0, sent: N, failed: 0 });
});
