// Kafka benchmark: @once/kafka against plain kafkajs doing the same work, same topic, same settings.
//   raw        kafkajs eachBatch, no database: the ceiling.
//   B1/msg     plain kafkajs eachMessage, one transaction per message (BEGIN; INSERT effect; COMMIT).
//   B1/batch   plain kafkajs eachBatch, one transaction per slice of BENCH_SLICE messages, offsets after.
//   once/msg   createKafkaConsumer({ batch: false }): one transaction per message.
//   once/batch createKafkaConsumer({ batch: true, batchSize: BENCH_SLICE }).
//   fenced/batch the same with offsetFencing: a fence row per partition instead of inbox rows.
// All variants read BENCH_MESSAGES messages pre-produced to one 6-partition topic, each with a
// fresh consumer group, 3 partitions at a time, and write the same effect row per message.
// Latency is per message from the start of its transaction (or slice) to its COMMIT: the messages
// are pre-produced, so produce-to-effect time would only measure the backlog.
// Size: BENCH_MESSAGES (default 20000; the full size is 200000).
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { migrate } from '@once/core';
import { createKafkaConsumer } from '@once/kafka';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { countingPool } from '../support/counting-pool.mjs';

const N = Number(process.env.BENCH_MESSAGES ?? 20_000);
const SLICE = Number(process.env.BENCH_SLICE ?? 500);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 3);
const PARTITIONS = 6;
const BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = 'once_bench_kafka';
const RUN = `bench-kafka-${process.pid}-${Date.now().toString(36)}`;
const TOPIC = `${RUN}-in`;

const raw = new pg.Pool({ connectionString: DB_URL, max: 12 });
raw.on('error', () => {});
const { pool, counter } = countingPool(raw);

await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(raw, { schema: SCHEMA });
await raw.query(
  `CREATE TABLE ${SCHEMA}.effects (variant text NOT NULL, id text NOT NULL, amount int NOT NULL)`,
);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (variant, id, amount) VALUES ($1, $2, $3)`;

const kafka = new Kafka({ clientId: RUN, brokers: BROKERS, logLevel: logLevel.NOTHING });
const admin = kafka.admin();
await admin.connect();
await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: PARTITIONS }], waitForLeaders: true });

async function produce() {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const t0 = performance.now();
  for (let i = 0; i < N; i += 2_000) {
    const messages = [];
    for (let k = i; k < Math.min(N, i + 2_000); k++) {
      messages.push({
        key: `customer-${k % 97}`,
        value: JSON.stringify({ order: k, amount: (k % 50) + 1 }),
        headers: { 'message-id': `order-${k}` },
      });
    }
    await producer.send({ topic: TOPIC, acks: -1, messages });
  }
  await producer.disconnect();
  return performance.now() - t0;
}

const consumerSettings = {
  sessionTimeout: 30_000,
  heartbeatInterval: 3_000,
  maxBytesPerPartition: 1_048_576,
};

/** Runs one variant until it has handled N messages; returns its measurements. */
async function measure(name, start) {
  await raw.query(`TRUNCATE ${SCHEMA}.effects, ${SCHEMA}.inbox CASCADE`);
  const latencies = [];
  let done = 0;
  let finish;
  const finished = new Promise((r) => {
    finish = r;
  });
  const progress = (n, ms) => {
    for (let k = 0; k < n; k++) latencies.push(ms);
    done += n;
    if (done >= N) finish();
  };
  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 100);
  const rt0 = counter.trips;
  const cpu0 = process.cpuUsage();
  const stop = await start(progress);
  const t0 = performance.now();
  await finished;
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const trips = counter.trips - rt0;
  await stop();
  clearInterval(sampler);
  if (name !== 'raw') {
    const { rows } = await raw.query(
      `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${SCHEMA}.effects`,
    );
    if (rows[0].n !== N || rows[0].d !== N)
      throw new Error(`${name}: ${rows[0].n} effects for ${N} messages`);
  }
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  return {
    name,
    msgsPerSec: Math.round(N / seconds),
    seconds: Number(seconds.toFixed(2)),
    p50Ms: Number(pct(50).toFixed(2)),
    p99Ms: Number(pct(99).toFixed(2)),
    roundTripsPerMsg: Number((trips / N).toFixed(2)),
    cpuUsPerMsg: Math.round((cpu.user + cpu.system) / N),
    peakRssMb: Math.round(peakRss / 1_048_576),
  };
}

function plainConsumer(name) {
  return kafka.consumer({ groupId: `${RUN}-${name}`, ...consumerSettings });
}

const variants = {
  raw: async (progress) => {
    const c = plainConsumer('raw');
    await c.connect();
    await c.subscribe({ topics: [TOPIC], fromBeginning: true });
    await c.run({
      partitionsConsumedConcurrently: CONCURRENCY,
      eachBatch: async ({ batch }) => progress(batch.messages.length, 0),
    });
    return () => c.disconnect();
  },
  'B1/msg': async (progress) => {
    const c = plainConsumer('b1msg');
    await c.connect();
    await c.subscribe({ topics: [TOPIC], fromBeginning: true });
    await c.run({
      partitionsConsumedConcurrently: CONCURRENCY,
      eachMessage: async ({ message }) => {
        const t = performance.now();
        const body = JSON.parse(message.value.toString());
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          await client.query(EFFECT, ['b1msg', message.headers['message-id'].toString(), body.amount]);
          await client.query('COMMIT');
        } finally {
          client.release();
        }
        progress(1, performance.now() - t);
      },
    });
    return () => c.disconnect();
  },
  'B1/batch': async (progress) => {
    const c = plainConsumer('b1batch');
    await c.connect();
    await c.subscribe({ topics: [TOPIC], fromBeginning: true });
    await c.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: CONCURRENCY,
      eachBatch: async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat }) => {
        for (let i = 0; i < batch.messages.length; i += SLICE) {
          const slice = batch.messages.slice(i, i + SLICE);
          const t = performance.now();
          const client = await pool.connect();
          try {
            await client.query('BEGIN');
            for (const m of slice) {
              const body = JSON.parse(m.value.toString());
              await client.query(EFFECT, ['b1batch', m.headers['message-id'].toString(), body.amount]);
            }
            await client.query('COMMIT');
          } finally {
            client.release();
          }
          const last = slice[slice.length - 1].offset;
          resolveOffset(last);
          await commitOffsetsIfNecessary({
            topics: [
              {
                topic: batch.topic,
                partitions: [{ partition: batch.partition, offset: String(BigInt(last) + 1n) }],
              },
            ],
          });
          progress(slice.length, performance.now() - t);
          await heartbeat();
        }
      },
    });
    return () => c.disconnect();
  },
};

for (const [name, mode, offsetFencing] of [
  ['once/msg', 'message', false],
  ['once/batch', 'batch', false],
  ['fenced/batch', 'batch', true],
]) {
  variants[name] = async (progress) => {
    const variant = `${offsetFencing ? 'fenced' : 'once'}${mode}`;
    const c = createKafkaConsumer({
      offsetFencing,
      kafka,
      groupId: `${RUN}-${variant}`,
      topics: [TOPIC],
      pool,
      schema: SCHEMA,
      batch: mode === 'batch',
      batchSize: SLICE,
      concurrency: CONCURRENCY,
      fromBeginning: true,
      deadLetterTopic: false,
      consumerConfig: { maxBytesPerPartition: consumerSettings.maxBytesPerPartition },
      handler: async (envelope, { tx }) => {
        const body = JSON.parse(envelope.body.toString());
        await tx.query(EFFECT, [variant, envelope.id, body.amount]);
      },
    });
    c.on('slice:done', (e) =>
      progress(e.messages, mode === 'message' ? e.durationMs / e.messages : e.durationMs),
    );
    await c.start();
    return () => c.stop();
  };
}

const produceMs = await produce();
console.log(
  `kafka bench: ${N} messages on ${PARTITIONS} partitions (produced in ${Math.round(produceMs)} ms), slice ${SLICE}, ${CONCURRENCY} partitions at a time, ${os.cpus().length} cores`,
);
const results = {};
const only = process.env.BENCH_ONLY?.split(',');
for (const [name, start] of Object.entries(variants)) {
  if (only && !only.includes(name)) continue;
  results[name] = await measure(name, start);
  console.log(`  ${name.padEnd(10)} ${String(results[name].msgsPerSec).padStart(7)} msgs/s`);
}

const ratio = (a, b) =>
  results[a] && results[b] ? Number((results[a].msgsPerSec / results[b].msgsPerSec).toFixed(2)) : Number.NaN;
const ratios = {
  'once/batch ÷ B1/batch': { value: ratio('once/batch', 'B1/batch'), target: 0.8 },
  'once/batch ÷ once/msg': { value: ratio('once/batch', 'once/msg'), target: 4 },
  'once/msg ÷ B1/msg': { value: ratio('once/msg', 'B1/msg'), target: 0.75 },
  'once/batch ÷ raw': { value: ratio('once/batch', 'raw'), target: undefined },
  'fenced/batch ÷ once/batch': { value: ratio('fenced/batch', 'once/batch'), target: undefined },
  'fenced/batch ÷ B1/batch': { value: ratio('fenced/batch', 'B1/batch'), target: undefined },
};

console.log('');
console.log('variant      msgs/s   p50 ms   p99 ms   RT/msg   CPU µs/msg   peak RSS MB');
for (const r of Object.values(results)) {
  console.log(
    `${r.name.padEnd(10)} ${String(r.msgsPerSec).padStart(8)} ${String(r.p50Ms).padStart(8)} ${String(r.p99Ms).padStart(8)} ${String(r.roundTripsPerMsg).padStart(8)} ${String(r.cpuUsPerMsg).padStart(12)} ${String(r.peakRssMb).padStart(13)}`,
  );
}
console.log('');
for (const [name, r] of Object.entries(ratios)) {
  const verdict =
    r.target === undefined
      ? ''
      : r.value >= r.target
        ? `(target ≥ ${r.target}: met)`
        : `(target ≥ ${r.target}: MISSED)`;
  console.log(`${name.padEnd(24)} ${r.value.toFixed(2)}× ${verdict}`);
}

mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
writeFileSync(
  new URL('../results/kafka.json', import.meta.url),
  `${JSON.stringify({ when: new Date().toISOString(), messages: N, partitions: PARTITIONS, slice: SLICE, concurrency: CONCURRENCY, cores: os.cpus().length, results, ratios }, null, 2)}\n`,
);
await admin.deleteTopics({ topics: [TOPIC] }).catch(() => {});
await admin.disconnect();
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await raw.end();
