// Profile harness for the RabbitMQ adapter (issue #14, the adapters' share): one variant per
// process, the bench's consumers (bench/rabbitmq/run.mjs: same prefetch, concurrency, batch, effect
// and floor), on a clean stream. The queue is filled before the consumer starts, so publishing is
// not measured; the first PROFILE_WARM messages warm up, the next PROFILE_N are measured. Prints
// one JSON line like run.mjs (Node CPU µs per message, main thread and other threads, scavenges
// per 1,000 messages); PROFILE_OUT writes a CPU profile of the measured part alone.
// inbox-msg, inbox-batch: the floor's consumers calling core's inbox directly (core without the
// adapter), so that once − inbox is the adapter's share and inbox − floor core's.
// Usage: PROFILE_VARIANT=once-msg|once-batch|floor-msg|floor-batch|inbox-msg|inbox-batch PROFILE_N=5000 PROFILE_WARM=2000
//        [PROFILE_OUT=/tmp/p/x.cpuprofile] node bench/profile/rabbitmq.mjs
// PROFILE_BUILD: a path to another build of @once/rabbitmq's dist/index.js, to compare two builds
// (bench/profile/compare.mjs with COMPARE_SCRIPT=rabbitmq.mjs and COMPARE_BEFORE).
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { PerformanceObserver } from 'node:perf_hooks';
import { createInbox, migrate } from '@once/core';
import * as rabbit from '@once/rabbitmq';
import amqp from 'amqplib';
import pg from 'pg';
import { createFloorTable, floorBatch, floorOne } from '../support/floor.mjs';
import { otherThreadsUs, threadNs } from './threads.mjs';

const { createRabbitConsumer } = process.env.PROFILE_BUILD ? await import(process.env.PROFILE_BUILD) : rabbit;
const VARIANT = process.env.PROFILE_VARIANT ?? 'once-msg';
const N = Number(process.env.PROFILE_N ?? 5000);
const WARM = Number(process.env.PROFILE_WARM ?? 2000);
const PREFETCH = Number(process.env.BENCH_PREFETCH ?? 200);
const MSG_CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = `once_prof_rmq_${VARIANT.replace('-', '_')}_${process.pid}`;
const QUEUE = `prof-rmq-${VARIANT}-${process.pid}`;
const batch = VARIANT.endsWith('batch');

const pool = new pg.Pool({ connectionString: DB_URL, max: 20 });
pool.on('error', () => {});
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(pool, { schema: SCHEMA });
await pool.query(
  `CREATE TABLE ${SCHEMA}.effects (variant text NOT NULL, id text NOT NULL, amount int NOT NULL)`,
);
await createFloorTable(pool, SCHEMA);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (variant, id, amount) VALUES ($1, $2, $3)`;
const effect = (q, id, amount) => q.query(EFFECT, [QUEUE, id, amount]);

const conn = await amqp.connect(AMQP_URL);
conn.on('error', () => {});
const admin = await conn.createConfirmChannel();
admin.on('error', () => {});
await admin.assertQueue(QUEUE, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
for (let i = 0; i < WARM + N; i++) {
  const body = Buffer.from(JSON.stringify({ id: `m-${i}`, amount: i % 100 }));
  if (
    !admin.sendToQueue(QUEUE, body, {
      persistent: true,
      messageId: `m-${i}`,
      contentType: 'application/json',
    })
  )
    await new Promise((r) => admin.once('drain', r));
  if (i % 5000 === 4999) await admin.waitForConfirms();
}
await admin.waitForConfirms();

let done = 0;
const marks = new Map([
  [WARM, undefined],
  [WARM + N, undefined],
]);
const reached = (k) => new Promise((r) => marks.set(k, r));
const onDone = () => {
  done++;
  marks.get(done)?.();
};

async function plainChannel() {
  const ch = await conn.createChannel();
  ch.on('error', () => {});
  await ch.prefetch(PREFETCH);
  return ch;
}

/** bench/rabbitmq/run.mjs's perMessage. */
async function perMessage(work) {
  const ch = await plainChannel();
  const buffer = [];
  let active = 0;
  const pump = () => {
    while (active < MSG_CONCURRENCY && buffer.length > 0) {
      const m = buffer.shift();
      active++;
      work(m)
        .then(() => {
          ch.ack(m);
          onDone();
        })
        .finally(() => {
          active--;
          pump();
        });
    }
  };
  await ch.consume(QUEUE, (m) => {
    buffer.push(m);
    pump();
  });
  return () => ch.close();
}

/** bench/rabbitmq/run.mjs's batched, one batch at a time. */
async function batched(work) {
  const ch = await plainChannel();
  const buffer = [];
  let running = 0;
  const pump = async () => {
    if (running >= 1 || buffer.length === 0) return;
    running++;
    const take = buffer.splice(0, BATCH);
    void pump();
    await work(take);
    ch.ack(take[take.length - 1], true);
    for (const _ of take) onDone();
    running--;
    setImmediate(pump);
  };
  await ch.consume(QUEUE, (m) => {
    buffer.push(m);
    void pump();
  });
  return () => ch.close();
}

let stop;
const warmed = reached(WARM);
const finished = reached(WARM + N);
finished.then(() => process.env.PROFILE_MARK && console.log('=== end'));
if (VARIANT === 'floor-msg') {
  stop = await perMessage((m) =>
    floorOne(pool, SCHEMA, QUEUE, m.properties.messageId, (q) =>
      effect(q, m.properties.messageId, JSON.parse(m.content.toString()).amount),
    ),
  );
} else if (VARIANT === 'floor-batch') {
  stop = await batched((take) =>
    floorBatch(
      pool,
      SCHEMA,
      QUEUE,
      take,
      (m) => m.properties.messageId,
      (q, m) => effect(q, m.properties.messageId, JSON.parse(m.content.toString()).amount),
    ),
  );
} else if (VARIANT.startsWith('inbox')) {
  const inbox = createInbox({
    pool,
    schema: SCHEMA,
    consumer: QUEUE,
    handler: async (e, { tx }) => {
      const body = JSON.parse(e.body.toString());
      await effect(tx, e.id, body.amount);
    },
  });
  const envelope = (m) => ({
    id: m.properties.messageId,
    body: m.content,
    headers: {},
    key: m.fields.routingKey,
    source: { broker: 'rabbitmq', queue: QUEUE },
    attempt: 1,
    redelivered: false,
  });
  const check = (o) => {
    if (o.status !== 'processed') throw new Error(`unexpected ${o.status}`);
  };
  stop = batch
    ? await batched(async (take) => (await inbox.processBatch(take.map(envelope))).forEach(check))
    : await perMessage(async (m) => check(await inbox.process(envelope(m))));
} else {
  const consumer = createRabbitConsumer({
    url: AMQP_URL,
    queue: QUEUE,
    pool,
    schema: SCHEMA,
    consumer: QUEUE,
    prefetch: PREFETCH,
    concurrency: batch ? 1 : MSG_CONCURRENCY,
    batch,
    batchSize: BATCH,
    handler: async (e, { tx }) => {
      const body = JSON.parse(e.body.toString());
      await effect(tx, e.id, body.amount);
    },
  });
  consumer.on('settled', (e) => {
    if (e.status === 'processed' || e.status === 'duplicate') onDone();
    else throw new Error(`unexpected ${e.status}`);
  });
  await consumer.start();
  stop = () => consumer.stop();
}

await warmed;
// PROFILE_MARK: a line between the warm-up and the measured part (for --trace-gc, --trace-opt).
if (process.env.PROFILE_MARK) console.log('=== measured');
let gcs = 0;
let gcMs = 0;
let majors = 0;
const obs = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration;
    if (e.detail?.kind === 1) gcs++;
    else if (e.detail?.kind === 2 || e.detail?.kind === 4) majors++;
  }
});
obs.observe({ entryTypes: ['gc'] });
const session = process.env.PROFILE_OUT ? new Session() : undefined;
if (session) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
}
gcs = 0;
gcMs = 0;
majors = 0;
const threads0 = threadNs();
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await finished;
const secs = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const threads1 = threadNs();
if (session) {
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(process.env.PROFILE_OUT, JSON.stringify(profile));
  session.disconnect();
}
obs.disconnect();
await stop();
const r = {
  variant: VARIANT,
  n: N,
  concurrency: batch ? 1 : MSG_CONCURRENCY,
  msgsPerSec: Math.round(N / secs),
  cpuUsPerMsg: Number(((cpu.user + cpu.system) / N).toFixed(1)),
  userUsPerMsg: Number((cpu.user / N).toFixed(1)),
  systemUsPerMsg: Number((cpu.system / N).toFixed(1)),
  mainThreadUsPerMsg: threads1 ? Number(((threads1.main - threads0.main) / 1000 / N).toFixed(1)) : null,
  otherThreadsUsPerMsg: threads1 ? Number(((threads1.other - threads0.other) / 1000 / N).toFixed(1)) : null,
  otherThreadsByName: otherThreadsUs(threads0, threads1, N),
  scavengesPer1k: Number(((gcs * 1000) / N).toFixed(2)),
  majorGcs: majors,
  // Pauses of the main thread for garbage collection, µs per message.
  gcUsPerMsg: Number(((gcMs * 1000) / N).toFixed(1)),
};
await admin.deleteQueue(QUEUE).catch(() => {});
for (const s of ['.quarantine', '.dead', '.retry.1000ms', '.retry.10000ms', '.retry.60000ms'])
  await admin.deleteQueue(QUEUE + s).catch(() => {});
await admin.deleteExchange(`${QUEUE}.dlx`).catch(() => {});
await conn.close();
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await pool.end();
console.log(JSON.stringify(r));
