import net from 'node:net';
import { createOutbox, createRelay, type Relay } from '@once/core';
import { createRabbitPublisher, type RabbitPublisher } from '@once/rabbitmq';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FaultProxy, quoteIdent, serviceUrls, uniqueName } from '../support/index.js';
import {
  amqpAdmin,
  createTestPool,
  dropServiceDbs,
  type ServiceDb,
  serviceDb,
  sleep,
  waitFor,
} from './fixtures/outbox-env.js';

// The relay's deadline against a real RabbitMQ that answers too late: a fault proxy delays every
// byte, so the broker's confirm arrives well after `publishTimeoutMs`. The round is rolled back
// for those rows (pending, attempts unchanged, never parked), the late confirm marks nothing
// sent, and once the broker answers in time the key drains in order.

const LATENCY_MS = 1_500;

let pool: pg.Pool;
let rabbit: Awaited<ReturnType<typeof amqpAdmin>>;
let proxy: FaultProxy;
const publishers: RabbitPublisher[] = [];
const relays: Relay[] = [];
const dbs: ServiceDb[] = [];
const queue = uniqueName('outbox-deadline');
const exchange = `${queue}-x`;

beforeAll(async () => {
  pool = createTestPool({ max: 6 });
  rabbit = await amqpAdmin();
  const u = new URL(serviceUrls().amqpUrl);
  proxy = await FaultProxy.start({ host: u.hostname, port: Number(u.port || 5672) });
  const setup = await rabbit.conn.createChannel();
  await setup.assertQueue(queue, { durable: true });
  await setup.assertExchange(exchange, 'fanout', { durable: true });
  await setup.bindQueue(queue, exchange, '');
  await setup.close();
});
afterAll(async () => {
  for (const r of relays) await r.stop();
  for (const p of publishers) await p.stop();
  await proxy.close();
  await rabbit.deleteQueues([queue]);
  await rabbit.deleteExchanges([exchange]);
  await rabbit.close();
  await dropServiceDbs(pool, dbs);
  await pool.end();
});

it('a confirm that comes after publishTimeoutMs marks nothing sent; the rows stay pending, attempts unchanged, and then drain in order', {
  timeout: 90_000,
}, async () => {
  const db = await serviceDb(pool, 'outbox_deadline');
  dbs.push(db);
  const outbox = createOutbox({ pool, schema: db.schema, destinations: [exchange] });
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push(await outbox.enqueue(pool, exchange, `${i}`, { key: 'k' }));
  const publisher = createRabbitPublisher({ url: proxy.url(serviceUrls().amqpUrl) });
  publishers.push(publisher);
  await publisher.start();
  const failures: string[] = [];
  const relay = createRelay({
    pool,
    schema: db.schema,
    publishers: { [exchange]: publisher },
    publishTimeoutMs: 300,
    maxAttempts: 1, // a counted failure would park the row at once
    retryDelayMs: () => 0,
    listen: false,
  });
  relays.push(relay);
  relay.on('outbox:publish-failed', (e) => failures.push(`${e.attempts}:${e.error.code}`));
  const rows = async () =>
    (
      await pool.query<{ status: string; attempts: number }>(
        `SELECT status, attempts FROM ${quoteIdent(db.schema)}.outbox ORDER BY seq`,
      )
    ).rows.map((r) => `${r.status}/${r.attempts}`);

  proxy.latencyMs(LATENCY_MS);
  expect(await relay.runOnce()).toBe(1);
  expect(await relay.runOnce()).toBe(1);
  expect(failures).toEqual(['0:PUBLISH_TIMEOUT', '0:PUBLISH_TIMEOUT']);
  // Long enough for the first publish to reach the broker and its confirm to come back.
  await sleep(4 * LATENCY_MS);
  expect(await rows()).toEqual(Array(5).fill('pending/0'));

  proxy.latencyMs(0);
  await waitFor(
    'the key to drain',
    async () => {
      await relay.runOnce();
      return (await rows()).every((r) => r.startsWith('sent'));
    },
    60_000,
  );
  // Each row counted one attempt: the one that was confirmed in time.
  expect(await rows()).toEqual(Array(5).fill('sent/1'));
  // The stalled copies may land too (same id: an inbox drops them), but never ahead of their turn.
  let got: { id: unknown; body: string }[] = [];
  await waitFor(
    'every message in the queue',
    async () => {
      got = got.concat(
        (await rabbit.drain(queue)).map((m) => ({ id: m.properties.messageId, body: m.content.toString() })),
      );
      return new Set(got.map((m) => m.body)).size === 5;
    },
    20_000,
  );
  const firstSeen = [...new Set(got.map((m) => m.body))];
  expect(firstSeen).toEqual(['0', '1', '2', '3', '4']);
  for (const m of got) expect(m.id).toBe(ids[Number(m.body)]);
});

it('a standalone publish has a bound: no confirm within confirmTimeoutMs rejects with AMQP_CONFIRM_TIMEOUT', {
  timeout: 60_000,
}, async () => {
  const publisher = createRabbitPublisher({ url: proxy.url(serviceUrls().amqpUrl), confirmTimeoutMs: 300 });
  publishers.push(publisher);
  proxy.latencyMs(0);
  await publisher.start();
  proxy.latencyMs(LATENCY_MS);
  await expect(
    publisher.publishOne({ id: 'bounded-1', destination: exchange, body: 'x' }),
  ).rejects.toMatchObject({ code: 'AMQP_CONFIRM_TIMEOUT', retryable: true });
  const [result] = await publisher.publish([{ id: 'bounded-2', destination: exchange, body: 'y' }]);
  expect(result).toMatchObject({
    id: 'bounded-2',
    ok: false,
    retryable: true,
    error: { code: 'AMQP_CONFIRM_TIMEOUT' },
  });
  proxy.latencyMs(0);
  // The publisher recovers on a fresh channel.
  await waitFor(
    'a publish to be confirmed again',
    async () =>
      publisher.publishOne({ id: 'bounded-3', destination: exchange, body: 'z' }).then(
        () => true,
        () => false,
      ),
    30_000,
  );
  await publisher.stop();
});

it('a broker that accepts the connection and never answers: the publish is bounded, the relay round ends, and stop() returns', {
  timeout: 60_000,
}, async () => {
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as net.AddressInfo).port;
  try {
    const publisher = createRabbitPublisher({
      url: `amqp://guest:guest@127.0.0.1:${port}`,
      confirmTimeoutMs: 300,
    });
    await expect(
      publisher.publishOne({ id: 'silent-1', destination: exchange, body: 'x' }),
    ).rejects.toMatchObject({ code: 'AMQP_CONFIRM_TIMEOUT' });

    const db = await serviceDb(pool, 'outbox_silent');
    dbs.push(db);
    const outbox = createOutbox({ pool, schema: db.schema, destinations: [exchange] });
    await outbox.enqueue(pool, exchange, 'y', { key: 'k' });
    const relayed = createRabbitPublisher({
      url: `amqp://guest:guest@127.0.0.1:${port}`,
      confirmTimeoutMs: 2_000,
    });
    const relay = createRelay({
      pool,
      schema: db.schema,
      publishers: { [exchange]: relayed },
      publishTimeoutMs: 300,
      listen: false,
    });
    expect(await relay.runOnce()).toBe(1);
    expect(relay.health().lastError).toMatch(/PUBLISH_TIMEOUT|publishTimeoutMs/);
    const row = await pool.query(`SELECT status, attempts FROM ${quoteIdent(db.schema)}.outbox`);
    expect(row.rows).toEqual([{ status: 'pending', attempts: 0 }]);
    await relay.stop();
    await publisher.stop();
    // Its handshake deadline (confirmTimeoutMs) ends the pending connect: stop() does not hang.
    await relayed.stop();
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  }
});
