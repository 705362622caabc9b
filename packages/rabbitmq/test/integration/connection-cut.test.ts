import { afterAll, beforeAll, expect, it } from 'vitest';
import { FaultProxy, freshDb } from '../../../../test/support/index.js';
import { createRabbitConsumer } from '../../src/index.js';
import { AMQP_URL, amqpAdmin, closeConnectionsNamed, SCALE, sleep, unique, waitFor } from './fixtures/env.js';
import { startNaiveConsumer } from './fixtures/naive-consumer.js';

let db: Awaited<ReturnType<typeof freshDb>>;
let admin: Awaited<ReturnType<typeof amqpAdmin>>;
const run = unique('rmq-cut');
const queues: string[] = [];

beforeAll(async () => {
  db = await freshDb('rmq_cut', 12);
  admin = await amqpAdmin(run);
});
afterAll(async () => {
  for (const q of queues) await admin.dropTopology(q);
  await admin.close();
  await db.close();
});

const N = Math.round(2_000 * SCALE);
const CUTS = 3;

async function countsFor(prefix: string) {
  const res = await db.pool.query<{ id: string; n: string }>(
    `SELECT id, count(*) AS n FROM ${db.effects} WHERE id LIKE $1 GROUP BY id`,
    [`${prefix}-%`],
  );
  return res.rows.map((r) => Number(r.n));
}

/** Publishes N messages, cuts the consumer's connection CUTS times while they are consumed. */
async function cutWhileConsuming(queue: string, prefix: string, cut: () => Promise<number>) {
  await admin.publishMany(
    queue,
    Array.from({ length: N }, (_, i) => ({ body: `${i}`, options: { messageId: `${prefix}-${i}` } })),
  );
  let cuts = 0;
  for (let k = 0; k < CUTS; k++) {
    // Cut while handlers are in flight: wait for some progress first.
    const mark = ((k + 1) * N) / (CUTS + 2);
    await waitFor(async () => (await countsFor(prefix)).length >= mark, 60_000, 'progress');
    cuts += await cut();
  }
  return cuts;
}

it(`rabbitmqctl close_connection ${CUTS} times mid-run: exactly once, nothing lost, no crash (naive control duplicates)`, async () => {
  // once
  const queue = unique(`${run}-once`);
  queues.push(queue);
  const prefix = unique('c');
  const name = `${run}-consumer`;
  const c = createRabbitConsumer({
    url: AMQP_URL,
    queue,
    pool: db.pool,
    schema: db.schema,
    consumer: queue,
    queueType: 'quorum',
    prefetch: 50,
    concurrency: 4,
    reconnectDelayMs: () => 100,
    socketOptions: { clientProperties: { connection_name: name } },
    handler: async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
      await sleep(3);
    },
  });
  let disconnects = 0;
  c.on('disconnected', () => disconnects++);
  await c.start();
  const cuts = await cutWhileConsuming(queue, prefix, () => closeConnectionsNamed(name));
  await waitFor(async () => (await countsFor(prefix)).length === N, 120_000, 'all effects');
  await waitFor(
    async () => c.state === 'running' && (await admin.count(queue)) === 0,
    60_000,
    'queues drained',
  );
  await waitFor(() => c.health().unsettled === 0, 30_000, 'acks');
  const counts = await countsFor(prefix);
  expect(cuts).toBeGreaterThanOrEqual(CUTS);
  expect(disconnects).toBeGreaterThanOrEqual(CUTS);
  expect(c.health()).toMatchObject({ healthy: true });
  expect(c.health().reconnects).toBeGreaterThanOrEqual(CUTS);
  expect(counts.length).toBe(N);
  expect(counts.filter((n) => n !== 1)).toEqual([]);
  await c.stop();

  // the control: same load, same cuts, plain amqplib with its own recovery
  const nq = unique(`${run}-naive`);
  queues.push(nq);
  await admin.ch.assertQueue(nq, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  const nprefix = unique('n');
  const nname = `${run}-naive`;
  const naive = await startNaiveConsumer({
    pool: db.pool,
    effects: db.effects,
    queue: nq,
    name: nname,
    prefetch: 50,
    concurrency: 4,
    // Slower than once's handler so the cuts (rabbitmqctl takes a second or two) land mid-run too.
    delayMs: () => 10,
  });
  const ncuts = await cutWhileConsuming(nq, nprefix, () => closeConnectionsNamed(nname));
  expect(ncuts).toBeGreaterThanOrEqual(CUTS);
  await waitFor(
    async () => (await countsFor(nprefix)).length === N && (await admin.count(nq)) === 0,
    120_000,
    'naive',
  );
  await sleep(500);
  const ncounts = await countsFor(nprefix);
  await naive.stop();
  // Handlers in flight at a cut commit, their acks die with the channel, the broker redelivers;
  // the prefetched buffer of the dead channel is processed too and redelivered as well.
  expect(ncounts.filter((n) => n > 1).length).toBeGreaterThan(0);
});

it(`fault proxy resets the TCP connection ${CUTS} times mid-run: exactly once, nothing lost (naive control duplicates)`, async () => {
  const proxy = await FaultProxy.start(new URL(AMQP_URL).host);
  const url = proxy.url(AMQP_URL);
  const cut = async () => {
    const n = proxy.openCount;
    proxy.cutAll();
    return n;
  };
  try {
    const queue = unique(`${run}-proxy`);
    queues.push(queue);
    const prefix = unique('p');
    const c = createRabbitConsumer({
      url,
      queue,
      pool: db.pool,
      schema: db.schema,
      consumer: queue,
      queueType: 'classic',
      prefetch: 50,
      concurrency: 4,
      batch: true,
      batchSize: 25,
      reconnectDelayMs: () => 100,
      handler: async (e, { tx }) => {
        await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
        await sleep(2);
      },
    });
    await c.start();
    const cuts = await cutWhileConsuming(queue, prefix, cut);
    await waitFor(async () => (await countsFor(prefix)).length === N, 120_000, 'all effects');
    await waitFor(
      async () => c.state === 'running' && (await admin.count(queue)) === 0,
      60_000,
      'queues drained',
    );
    await waitFor(() => c.health().unsettled === 0, 30_000, 'acks');
    const counts = await countsFor(prefix);
    expect(cuts).toBeGreaterThanOrEqual(CUTS);
    expect(c.health().reconnects).toBeGreaterThanOrEqual(CUTS);
    expect(proxy.acceptedCount).toBeGreaterThan(CUTS);
    expect(counts.length).toBe(N);
    expect(counts.filter((n) => n !== 1)).toEqual([]);
    await c.stop();

    const nq = unique(`${run}-proxy-naive`);
    queues.push(nq);
    await admin.ch.assertQueue(nq, { durable: true });
    const nprefix = unique('pn');
    const naive = await startNaiveConsumer({
      url,
      pool: db.pool,
      effects: db.effects,
      queue: nq,
      name: `${run}-proxy-naive`,
      prefetch: 50,
      concurrency: 4,
      delayMs: () => 10,
    });
    await cutWhileConsuming(nq, nprefix, cut);
    await waitFor(
      async () => (await countsFor(nprefix)).length === N && (await admin.count(nq)) === 0,
      120_000,
      'naive',
    );
    await sleep(500);
    const ncounts = await countsFor(nprefix);
    await naive.stop();
    expect(ncounts.filter((n) => n > 1).length).toBeGreaterThan(0);
  } finally {
    await proxy.close();
  }
});
