// Outbox relay benchmark, per broker (Kafka, RabbitMQ, SQS on ElasticMQ), all in one run:
//   raw      the broker publisher alone (the same publisher object and settings the relay uses,
//            calls of BENCH_BATCH messages one after another), no outbox: the ratio's denominator.
//            Run before and after the relay; the better of the two is kept.
//   drain    a backlog of BENCH_ROWS outbox rows, enqueued first, drained by one relay: rows/s from
//            relay start to the last row confirmed by the broker.
//   latency  steady state: one transaction per message at BENCH_RATE msg/s for BENCH_SECONDS, each
//            woken after commit (outbox.wake()); latency = commit → broker confirm of that row.
// Rows carry one of BENCH_KEYS ordering keys (the relay keeps one row per key in flight).
// Size: BENCH_ROWS (default 10000; the issue's full size is 100000), BENCH_ONLY=kafka,rabbitmq,sqs.
// Writes bench/results/outbox.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { CreateQueueCommand, DeleteQueueCommand, PurgeQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { createOutbox, createRelay, migrate } from '@once/core';
import { createKafkaPublisher } from '@once/kafka';
import { createRabbitPublisher } from '@once/rabbitmq';
import { createSqsPublisher } from '@once/sqs';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';

const ROWS = Number(process.env.BENCH_ROWS ?? 10_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const KEYS = Number(process.env.BENCH_KEYS ?? 1_000);
const RATE = Number(process.env.BENCH_RATE ?? 100);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ONLY = (process.env.BENCH_ONLY ?? 'kafka,rabbitmq,sqs').split(',');
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const KAFKA_BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const SQS_ENDPOINT = process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324';
const RUN = `bench-outbox-${process.pid}`;

const pool = new pg.Pool({ connectionString: DB_URL, max: 10 });
pool.on('error', () => {});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const body = (i) => Buffer.from(JSON.stringify({ i, pad: 'x'.repeat(200) }));
const keyOf = (i) => `k${i % KEYS}`;

/** The three brokers: a publisher, its destination, and how to empty and remove it. */
async function kafkaTarget() {
  const kafka = new Kafka({ clientId: RUN, brokers: KAFKA_BROKERS, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const topic = `${RUN}-topic`;
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 3 }] });
  const publisher = createKafkaPublisher({ kafka });
  await publisher.start();
  return {
    name: 'kafka',
    destination: topic,
    publisher,
    async reset() {},
    async close() {
      await publisher.stop();
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
      await admin.disconnect();
    },
  };
}

async function rabbitTarget() {
  const conn = await amqp.connect(AMQP_URL);
  conn.on('error', () => {});
  const ch = await conn.createChannel();
  const exchange = `${RUN}-x`;
  const queue = `${RUN}-q`;
  await ch.assertExchange(exchange, 'fanout', { durable: true });
  await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await ch.bindQueue(queue, exchange, '');
  const publisher = createRabbitPublisher({ url: AMQP_URL });
  await publisher.start();
  return {
    name: 'rabbitmq',
    destination: exchange,
    publisher,
    async reset() {
      await ch.purgeQueue(queue);
    },
    async close() {
      await publisher.stop();
      await ch.deleteQueue(queue).catch(() => {});
      await ch.deleteExchange(exchange).catch(() => {});
      await conn.close().catch(() => {});
    },
  };
}

async function sqsTarget() {
  const client = new SQSClient({
    endpoint: SQS_ENDPOINT,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const res = await client.send(
    new CreateQueueCommand({ QueueName: `${RUN}.fifo`, Attributes: { FifoQueue: 'true' } }),
  );
  const url = res.QueueUrl;
  const publisher = createSqsPublisher({ client });
  return {
    name: 'sqs',
    destination: url,
    publisher,
    async reset() {
      await client.send(new PurgeQueueCommand({ QueueUrl: url })).catch(() => {});
    },
    async close() {
      await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
      client.destroy();
    },
  };
}

/** The broker's own rate: the same publisher, calls of BATCH messages in sequence, no outbox. */
async function raw(target) {
  const t0 = performance.now();
  for (let i = 0; i < ROWS; i += BATCH) {
    const messages = [];
    for (let j = i; j < Math.min(i + BATCH, ROWS); j++) {
      messages.push({
        id: `${RUN}-raw-${j}`,
        destination: target.destination,
        key: keyOf(j),
        body: body(j),
        headers: {},
      });
    }
    const out = await target.publisher.publish(messages);
    if (out?.some((r) => !r.ok))
      throw new Error(`raw publish failed: ${JSON.stringify(out.find((r) => !r.ok))}`);
  }
  return ROWS / ((performance.now() - t0) / 1000);
}

/** Wraps a publisher to time each row the broker confirmed (for latency). */
function timed(publisher, onConfirmed) {
  return {
    async publish(messages) {
      const out = await publisher.publish(messages);
      const now = performance.now();
      if (!out) for (const m of messages) onConfirmed(m.id, now);
      else for (const r of out) if (r.ok) onConfirmed(r.id, now);
      return out;
    },
  };
}

async function enqueueBacklog(outbox, destination) {
  for (let i = 0; i < ROWS; i += 1_000) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      for (let j = i; j < Math.min(i + 1_000, ROWS); j++) {
        await outbox.enqueue(client, destination, body(j), { key: keyOf(j) });
      }
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  }
}

async function drainAndLatency(target) {
  const schema = `once_bench_outbox_${target.name}`;
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await migrate(pool, { schema });
  const outbox = createOutbox({ pool, schema, destinations: [target.destination] });
  const committedAt = new Map();
  const latencies = [];
  const publisher = timed(target.publisher, (id, at) => {
    const c = committedAt.get(id);
    if (c !== undefined) latencies.push(at - c);
  });
  await enqueueBacklog(outbox, target.destination);
  const relay = createRelay({
    pool,
    schema,
    publishers: { [target.destination]: publisher },
    batchSize: BATCH,
  });
  // Rows count as drained when the relay has committed them `sent` (after the broker confirmed).
  let sent = 0;
  relay.on('outbox:published', ({ count }) => {
    sent += count;
  });
  const t0 = performance.now();
  await relay.start();
  while (sent < ROWS) await sleep(5);
  const drainRate = ROWS / ((performance.now() - t0) / 1000);
  const parkedOrPending = await pool.query(
    `SELECT count(*)::int AS n FROM ${schema}.outbox WHERE status <> 'sent'`,
  );
  if (parkedOrPending.rows[0].n !== 0)
    throw new Error(`${parkedOrPending.rows[0].n} rows not sent after the drain`);

  // Steady state: one message per transaction at RATE/s, each woken after its commit.
  const total = RATE * SECONDS;
  const start = performance.now();
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const id = await outbox.enqueue(client, target.destination, body(i), { key: keyOf(i) });
      await client.query('COMMIT');
      committedAt.set(id, performance.now());
    } finally {
      client.release();
    }
    outbox.wake();
  }
  const until = Date.now() + 30_000;
  while (latencies.length < total && Date.now() < until) await sleep(10);
  await relay.stop();
  await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  latencies.sort((a, b) => a - b);
  const pct = (p) =>
    latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? Number.NaN;
  return { drainRate, p50: pct(50), p99: pct(99), latencySamples: latencies.length };
}

const makers = { kafka: kafkaTarget, rabbitmq: rabbitTarget, sqs: sqsTarget };
const results = [];
for (const name of ONLY) {
  const make = makers[name];
  if (!make) throw new Error(`unknown broker ${name} in BENCH_ONLY`);
  const target = await make();
  try {
    // Raw runs before and after the relay and the better run is kept: a cold broker (ElasticMQ's
    // JIT, a fresh Kafka partition) must not flatter the relay's ratio.
    await target.reset();
    const rawBefore = await raw(target);
    await target.reset();
    const r = await drainAndLatency(target);
    await target.reset();
    const rawRate = Math.max(rawBefore, await raw(target));
    await target.reset();
    results.push({
      broker: name,
      rawMsgsPerSec: Math.round(rawRate),
      relayRowsPerSec: Math.round(r.drainRate),
      ratio: Number((r.drainRate / rawRate).toFixed(2)),
      latencyP50Ms: Number(r.p50.toFixed(1)),
      latencyP99Ms: Number(r.p99.toFixed(1)),
      latencySamples: r.latencySamples,
    });
  } finally {
    await target.close();
  }
}
await pool.end();

console.log(
  `outbox relay: ${ROWS} rows backlog, batch ${BATCH}, ${KEYS} keys; latency at ${RATE} msg/s for ${SECONDS} s`,
);
console.log('broker     raw msg/s  relay rows/s  relay/raw  enqueue→confirm p50  p99');
for (const r of results) {
  console.log(
    `${r.broker.padEnd(9)}  ${String(r.rawMsgsPerSec).padStart(9)}  ${String(r.relayRowsPerSec).padStart(12)}  ${r.ratio.toFixed(2).padStart(9)}  ${`${r.latencyP50Ms} ms`.padStart(19)}  ${`${r.latencyP99Ms} ms`}`,
  );
}
mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
writeFileSync(
  new URL('../results/outbox.json', import.meta.url),
  `${JSON.stringify(
    {
      bench: 'outbox',
      at: new Date().toISOString(),
      machine: { cpus: os.cpus().length, node: process.version },
      settings: { rows: ROWS, batch: BATCH, keys: KEYS, rate: RATE, seconds: SECONDS },
      results,
    },
    null,
    2,
  )}\n`,
);
