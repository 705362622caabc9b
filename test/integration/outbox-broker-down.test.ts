import { createOutbox, createRelay, type Relay } from '@once/core';
import { createRabbitPublisher, type RabbitPublisher } from '@once/rabbitmq';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FaultProxy, quoteIdent, serviceUrls, uniqueName } from '../support/index.js';
import {
  amqpAdmin,
  createTestPool,
  dropServiceDbs,
  SCALE,
  type ServiceDb,
  serviceDb,
  sleep,
  waitFor,
} from './fixtures/outbox-env.js';

// The relay publishes to RabbitMQ through a fault proxy. While the proxy refuses connections,
// rows accumulate: every publish fails, the relay retries each row with growing delays (so a
// dead broker is not hammered) and parks nothing within its budget. When connections are
// accepted again it drains everything; a connection cut in the middle of the drain only
// re-sends rows that were not confirmed (same id, deduplicated downstream).

const N = Math.round(400 * SCALE);
const DOWN_MS = 6_000;

let pool: pg.Pool;
let rabbit: Awaited<ReturnType<typeof amqpAdmin>>;
let proxy: FaultProxy;
let relay: Relay | undefined;
let publisher: RabbitPublisher | undefined;
const dbs: ServiceDb[] = [];
const queue = uniqueName('outbox-down');
const exchange = `${queue}-x`;

beforeAll(async () => {
  pool = createTestPool({ max: 6 });
  rabbit = await amqpAdmin();
  const u = new URL(serviceUrls().amqpUrl);
  proxy = await FaultProxy.start({ host: u.hostname, port: Number(u.port || 5672) });
});
afterAll(async () => {
  await relay?.stop();
  await publisher?.stop();
  await proxy.close();
  await rabbit.deleteQueues([queue]);
  await rabbit.deleteExchanges([exchange]);
  await rabbit.close();
  await dropServiceDbs(pool, dbs);
  await pool.end();
});

it(`broker unreachable while ${N} rows accumulate: the relay backs off, parks nothing, then drains all`, {
  timeout: 120_000,
}, async () => {
  const db = await serviceDb(pool, 'outbox_down');
  dbs.push(db);
  const setup = await rabbit.conn.createChannel();
  await setup.assertQueue(queue, { durable: true });
  await setup.assertExchange(exchange, 'fanout', { durable: true });
  await setup.bindQueue(queue, exchange, '');
  await setup.close();

  proxy.refuse(true);
  // Rows without a key are unordered and go out in batches; the fanout exchange routes them.
  const outbox = createOutbox({ pool, schema: db.schema, destinations: [exchange] });
  publisher = createRabbitPublisher({ url: proxy.url(serviceUrls().amqpUrl) });
  const failures: { attempts: number; error: string }[] = [];
  let parkedEvents = 0;
  relay = createRelay({
    pool,
    schema: db.schema,
    publishers: { [exchange]: publisher },
    batchSize: 50,
    pollIntervalMs: 100,
  });
  relay.on('outbox:publish-failed', (e) => failures.push({ attempts: e.attempts, error: e.error.message }));
  relay.on('outbox:parked', () => parkedEvents++);
  await relay.start();

  const ids: string[] = [];
  const startedAt = Date.now();
  for (let i = 0; i < N; i += 50) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      for (let j = i; j < Math.min(i + 50, N); j++) {
        ids.push(await outbox.enqueue(client, exchange, { n: j }));
      }
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    outbox.wake();
  }
  await sleep(DOWN_MS - (Date.now() - startedAt));

  // Down: nothing sent, nothing parked, every row tried and pending with the broker's error.
  const rows = await pool.query<{ attempts: number; status: string; error: string | null; waitMs: number }>(
    `SELECT attempts, status, last_error->>'message' AS error,
       greatest(0, extract(epoch FROM available_at - now()) * 1000)::int AS "waitMs"
     FROM ${quoteIdent(db.schema)}.outbox`,
  );
  expect(await db.outboxCounts()).toEqual({ pending: N, sent: 0, failed: 0 });
  expect(parkedEvents).toBe(0);
  expect(rows.rows.every((r) => r.attempts >= 1 && r.error !== null)).toBe(true);
  expect(failures.length).toBeGreaterThan(0);
  expect(failures[0]!.error).toMatch(/connect|ECONNRESET|closed|socket/i);
  // Backoff: with 500 ms doubling, no row can have been tried more than ~log2(6000/500)+1 times in
  // the window; a relay that retried in a tight loop (every 100 ms poll) would be near 60.
  const maxAttempts = Math.max(...rows.rows.map((r) => r.attempts));
  console.log(
    `[outbox-broker-down] after ${DOWN_MS} ms down: ${failures.length} failed publishes, max attempts per row ${maxAttempts}, ${proxy.acceptedCount} connection attempts, health ${JSON.stringify(relay.health())}`,
  );
  expect(maxAttempts).toBeLessThanOrEqual(6);
  expect(relay.health().published).toBe(0);

  // Up again: everything drains. Cut the connection once in the middle of the drain.
  proxy.refuse(false);
  await waitFor('some rows sent', async () => (await db.outboxCounts()).sent > 0, 60_000);
  proxy.cutAll();
  await waitFor('every row sent', async () => (await db.outboxCounts()).sent === N, 90_000);
  expect(await db.outboxCounts()).toEqual({ pending: 0, sent: N, failed: 0 });
  expect(parkedEvents).toBe(0);

  // Every row reached the queue at least once (a row whose confirm was lost in the cut is sent
  // again with the same message id: the downstream inbox drops that copy).
  await waitFor('the queue to hold every row', async () => (await rabbit.count(queue)) >= N, 30_000);
  const got = await rabbit.drain(queue);
  const seen = new Set(got.map((m) => m.properties.messageId as string));
  expect(ids.filter((id) => !seen.has(id))).toEqual([]);
  console.log(`[outbox-broker-down] drained ${N} rows; ${got.length - seen.size} re-sent after the cut`);
});
