// Kafka benchmark: @once/kafka against plain kafkajs doing the same work, same topic, same settings.
//   raw        kafkajs eachBatch, no database: the ceiling.
//   B1/msg     plain kafkajs eachMessage, one transaction per message (BEGIN; INSERT effect; COMMIT).
//   B1/batch   plain kafkajs eachBatch, one transaction per slice of BENCH_SLICE messages, offsets after.
//   once/msg   createKafkaConsumer({ batch: false }): one transaction per message.
//   once/batch createKafkaConsumer({ batch: true, batchSize: BENCH_SLICE }).
//   floor/msg, floor/batch  the floor (bench/support/floor.mjs, a frozen hand-written inbox) in
//              B1/msg's and B1/batch's consumers: same settings, its claim before the effect,
//              offsets committed after COMMIT.
// BENCH_REPS interleaved repetitions (default 7), each variant on a fresh consumer group per
// repetition; per variant the median; ratios are the median of per-repetition paired ratios [min–max].
// All variants read BENCH_MESSAGES messages pre-produced to one 6-partition topic, each with a
// fresh consumer group, 3 partitions at a time, and write the same effect row per message.
// Latency is per message from the start of its transaction (or slice) to its COMMIT: the messages
// are pre-produced, so produce-to-effect time would only measure the backlog.
// CPU per message: Node (this process) and, where the server's backends can be read from /proc,
// Node plus the bench's own PostgreSQL backends (named by application_name, so another program's
// statements on a shared server are not counted; bench/support/proc-cpu.mjs, backendCpu).
// Size: BENCH_MESSAGES (default 20000; the full size is 200000), BENCH_ONLY=name,name,
// BENCH_SCHEMA (default once_bench_kafka), BENCH_RESULTS (the file under bench/results/, default
// kafka.json).
// Streams (bench/support/faults.mjs; BENCH_STREAMS=clean,faults, default both), each on its own
// topic: clean, and faults, where 5 % of the messages are produced twice and 5 % throw after their
// effect on the first attempt. Every variant runs a failed attempt again in place, on its
// partition, after BENCH_RETRY_MS (default 0): once through its retry (retryDelayMs, waited in
// place as its inlineRetryMaxMs allows), B1 and the floor in their own loop (untilCommitted below),
// offsets committed only after a COMMIT. Every run checks its effects: each id once (B1,
// without an inbox: each copy once). A run with no message done for BENCH_STALL_MS (default 60 s)
// fails the bench, naming the variant, the repetition and how many messages were done.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { migrate } from '@once/core';
import { createKafkaConsumer } from '@once/kafka';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { countingPool } from '../support/counting-pool.mjs';
import { bareTransaction, checkEffects, faultRun, streamsFromEnv } from '../support/faults.mjs';
import { createFloorTable, floorBatch, floorOne } from '../support/floor.mjs';
import { doneCount } from '../support/measure.mjs';
import { backendCpu } from '../support/proc-cpu.mjs';
import { fmtRatio, gitCommit, median, pairedRatio } from '../support/report.mjs';

const N = Number(process.env.BENCH_MESSAGES ?? 20_000);
const SLICE = Number(process.env.BENCH_SLICE ?? 500);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 3);
const REPS = Number(process.env.BENCH_REPS ?? 7);
const RETRY_MS = Number(process.env.BENCH_RETRY_MS ?? 0);
const PARTITIONS = 6;
const BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = process.env.BENCH_SCHEMA ?? 'once_bench_kafka';
const STREAMS = streamsFromEnv();
const RESULTS = process.env.BENCH_RESULTS ?? 'kafka.json';
const RUN = `bench-kafka-${process.pid}-${Date.now().toString(36)}`;
const topicOf = (stream) => `${RUN}-${stream.mode}`;

// The pool's backends are named so their CPU can be read (backendCpu) and kept open for a whole run.
const raw = new pg.Pool({ connectionString: DB_URL, max: 12, application_name: RUN, idleTimeoutMillis: 0 });
raw.on('error', () => {});
const monitor = new pg.Client({ connectionString: DB_URL, application_name: `${RUN}-monitor` });
await monitor.connect();
const { pool, counter } = countingPool(raw);

await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(raw, { schema: SCHEMA });
await raw.query(
  `CREATE TABLE ${SCHEMA}.effects (variant text NOT NULL, id text NOT NULL, amount int NOT NULL)`,
);
await createFloorTable(raw, SCHEMA);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (variant, id, amount) VALUES ($1, $2, $3)`;

const kafka = new Kafka({ clientId: RUN, brokers: BROKERS, logLevel: logLevel.NOTHING });
const admin = kafka.admin();
await admin.connect();
await admin.createTopics({
  topics: STREAMS.map((s) => ({ topic: topicOf(s), numPartitions: PARTITIONS })),
  waitForLeaders: true,
});

/** The current run's stream (which ids fail once), its topic, and the redeliveries seen so far. */
let run;
let TOPIC;
let redelivered = 0;
/** The effect every variant writes, then the stream's transient failure (so it rolls back). */
async function effect(q, variant, id, amount) {
  await q.query(EFFECT, [variant, id, amount]);
  run.fail(id);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The plain consumers' retry (B1 and the floor): `attempt()` (one transaction over `n` messages)
 * runs again after RETRY_MS while it fails with the stream's transient failure, each failed
 * attempt counted; anything else is thrown to kafkajs. In place, as once retries a short delay,
 * not by throwing the failure to kafkajs: kafkajs 2.2.4 answers an error from eachMessage or
 * eachBatch by ending the fetch round of every partition and running its whole fetch loop again
 * under the consumer's `retry` backoff (5 retries, from 300 ms, doubling), whose count successes
 * do not reset (kafkajs issue #1415). With one message in twenty failing, each round every
 * partition stopped at its next failure, the waits grew, and every sixth failed round crashed the
 * consumer (KafkaJSNumberOfRetriesExceeded), which kafkajs restarts after another wait: at 20,000
 * messages B1/msg did about 40 messages a second and looked idle.
 */
async function untilCommitted(n, heartbeat, attempt) {
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (!String(err?.message).startsWith('bench:')) throw err;
      redelivered += n;
      await heartbeat();
      if (RETRY_MS > 0) await sleep(RETRY_MS);
    }
  }
}

async function produce(stream) {
  const { order } = faultRun(stream, N, (k) => `order-${k}`);
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const t0 = performance.now();
  for (let i = 0; i < order.length; i += 2_000) {
    const messages = [];
    for (const k of order.slice(i, i + 2_000)) {
      messages.push({
        key: `customer-${k % 97}`,
        value: JSON.stringify({ order: k, amount: (k % 50) + 1 }),
        headers: { 'message-id': `order-${k}` },
      });
    }
    await producer.send({ topic: topicOf(stream), acks: -1, messages });
  }
  await producer.disconnect();
  return performance.now() - t0;
}

const consumerSettings = {
  sessionTimeout: 30_000,
  heartbeatInterval: 3_000,
  maxBytesPerPartition: 1_048_576,
};

/**
 * Runs one variant until it has handled every published message; returns its measurements.
 * Fails, naming the variant and the repetition, if no message is done for BENCH_STALL_MS.
 */
async function measure(name, start, rep, stream) {
  run = faultRun(stream, N, (k) => `order-${k}`);
  TOPIC = topicOf(stream);
  redelivered = 0;
  await raw.query(`TRUNCATE ${SCHEMA}.effects, ${SCHEMA}.inbox, ${SCHEMA}.floor_inbox CASCADE`);
  const latencies = [];
  const done = doneCount({
    total: run.published,
    label: `kafka ${name} (${stream.mode} stream, repetition ${rep + 1} of ${REPS})`,
  });
  // `n` messages done (committed, or skipped as duplicates) in `ms` each; `count: false` records
  // latencies only (once's slices, whose messages are counted by their inbox outcomes).
  const progress = (n, ms, count = true) => {
    if (ms !== undefined) for (let k = 0; k < n; k++) latencies.push(ms);
    if (count) done.add(n);
  };
  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 100);
  const rt0 = counter.trips;
  const cpu0 = process.cpuUsage();
  const pg0 = await backendCpu(monitor, RUN);
  const stop = await start(progress, `-${stream.mode}-${rep}`);
  const t0 = performance.now();
  await done.finished;
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const pgSeconds = await backendCpu(monitor, RUN, pg0);
  const trips = counter.trips - rt0;
  await stop();
  clearInterval(sampler);
  if (name !== 'raw') {
    const { rows } = await raw.query(
      `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${SCHEMA}.effects`,
    );
    checkEffects({
      variant: name,
      stream,
      rows: rows[0].n,
      ids: rows[0].d,
      run,
      dedup: !name.startsWith('B1'),
    });
  }
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  return {
    name,
    redelivered,
    msgsPerSec: Math.round(N / seconds),
    seconds: Number(seconds.toFixed(2)),
    p50Ms: Number(pct(50).toFixed(2)),
    p99Ms: Number(pct(99).toFixed(2)),
    roundTripsPerMsg: Number((trips / N).toFixed(2)),
    cpuUsPerMsg: Math.round((cpu.user + cpu.system) / N),
    nodePgCpuUsPerMsg: pgSeconds === null ? null : Math.round((cpu.user + cpu.system + pgSeconds * 1e6) / N),
    loadavg1: Number(os.loadavg()[0].toFixed(2)),
    peakRssMb: Math.round(peakRss / 1_048_576),
  };
}

function plainConsumer(name) {
  return kafka.consumer({ groupId: `${RUN}-${name}`, ...consumerSettings });
}

/**
 * B1/batch's loop over a kafkajs batch: `work(slice)` in one transaction per slice (again while it
 * fails), offsets after.
 */
function sliced(work, progress) {
  return async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat }) => {
    for (let i = 0; i < batch.messages.length; i += SLICE) {
      const slice = batch.messages.slice(i, i + SLICE);
      let t;
      await untilCommitted(slice.length, heartbeat, () => {
        t = performance.now();
        return work(slice);
      });
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
  };
}

const variants = {
  raw: async (progress, tag) => {
    const c = plainConsumer(`raw${tag}`);
    await c.connect();
    await c.subscribe({ topics: [TOPIC], fromBeginning: true });
    await c.run({
      partitionsConsumedConcurrently: CONCURRENCY,
      eachBatch: async ({ batch }) => progress(batch.messages.length, 0),
    });
    return () => c.disconnect();
  },
  'B1/msg': async (progress, tag) => {
    const c = plainConsumer(`b1msg${tag}`);
    await c.connect();
    await c.subscribe({ topics: [TOPIC], fromBeginning: true });
    await c.run({
      partitionsConsumedConcurrently: CONCURRENCY,
      eachMessage: async ({ message, heartbeat }) => {
        const body = JSON.parse(message.value.toString());
        let t;
        await untilCommitted(1, heartbeat, () => {
          t = performance.now();
          return bareTransaction(pool, (client) =>
            effect(client, 'b1msg', message.headers['message-id'].toString(), body.amount),
          );
        });
        progress(1, performance.now() - t);
      },
    });
    return () => c.disconnect();
  },
  'B1/batch': async (progress, tag) => {
    const c = plainConsumer(`b1batch${tag}`);
    await c.connect();
    await c.subscribe({ topics: [TOPIC], fromBeginning: true });
    await c.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: CONCURRENCY,
      eachBatch: sliced(async (slice) => {
        await bareTransaction(pool, async (client) => {
          for (const m of slice) {
            const body = JSON.parse(m.value.toString());
            await effect(client, 'b1batch', m.headers['message-id'].toString(), body.amount);
          }
        });
      }, progress),
    });
    return () => c.disconnect();
  },
  'floor/msg': async (progress, tag) => {
    const c = plainConsumer(`floormsg${tag}`);
    await c.connect();
    await c.subscribe({ topics: [TOPIC], fromBeginning: true });
    await c.run({
      partitionsConsumedConcurrently: CONCURRENCY,
      eachMessage: async ({ message, heartbeat }) => {
        const body = JSON.parse(message.value.toString());
        const id = message.headers['message-id'].toString();
        let t;
        await untilCommitted(1, heartbeat, () => {
          t = performance.now();
          return floorOne(pool, SCHEMA, 'floor-kafka', id, (q) => effect(q, 'floormsg', id, body.amount));
        });
        progress(1, performance.now() - t);
      },
    });
    return () => c.disconnect();
  },
  'floor/batch': async (progress, tag) => {
    const c = plainConsumer(`floorbatch${tag}`);
    await c.connect();
    await c.subscribe({ topics: [TOPIC], fromBeginning: true });
    await c.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: CONCURRENCY,
      eachBatch: sliced(
        (slice) =>
          floorBatch(
            pool,
            SCHEMA,
            'floor-kafka',
            slice,
            (m) => m.headers['message-id'].toString(),
            (q, m) =>
              effect(
                q,
                'floorbatch',
                m.headers['message-id'].toString(),
                JSON.parse(m.value.toString()).amount,
              ),
          ),
        progress,
      ),
    });
    return () => c.disconnect();
  },
};

for (const [name, mode] of [
  ['once/msg', 'message'],
  ['once/batch', 'batch'],
]) {
  variants[name] = async (progress, tag) => {
    const variant = `once${mode}`;
    const c = createKafkaConsumer({
      kafka,
      groupId: `${RUN}-${variant}${tag}`,
      topics: [TOPIC],
      pool,
      schema: SCHEMA,
      batch: mode === 'batch',
      batchSize: SLICE,
      concurrency: CONCURRENCY,
      fromBeginning: true,
      deadLetterTopic: false,
      retryDelayMs: () => RETRY_MS,
      consumerConfig: { maxBytesPerPartition: consumerSettings.maxBytesPerPartition },
      handler: async (envelope, { tx }) => {
        const body = JSON.parse(envelope.body.toString());
        await effect(tx, variant, envelope.id, body.amount);
      },
    });
    c.on('slice:done', (e) =>
      progress(e.messages, mode === 'message' ? e.durationMs / e.messages : e.durationMs, false),
    );
    // Done once committed (processed, or a duplicate skipped); anything else comes back.
    c.inbox.on('message:processed', () => progress(1, undefined));
    c.inbox.on('message:duplicate', () => progress(1, undefined));
    for (const e of ['message:retry', 'message:not-run', 'message:busy'])
      c.inbox.on(e, () => {
        redelivered++;
      });
    await c.start();
    return () => c.stop();
  };
}

const produceMs = {};
for (const stream of STREAMS) produceMs[stream.mode] = Math.round(await produce(stream));
console.log(
  `kafka bench: ${N} messages on ${PARTITIONS} partitions (produced in ${JSON.stringify(produceMs)} ms), slice ${SLICE}, ${CONCURRENCY} partitions at a time, retry after ${RETRY_MS} ms, ${os.cpus().length} cores`,
);
const only = process.env.BENCH_ONLY?.split(',');
const allNames = Object.keys(variants).filter((n) => !only || only.includes(n));
const byStream = [];
for (const stream of STREAMS) {
  const names = allNames;
  const runs = Object.fromEntries(names.map((n) => [n, []]));
  console.log(`\n${stream.mode} stream`);
  for (let rep = 0; rep < REPS; rep++) {
    // Interleaved, in a rotating order, so a noisy neighbour slows every variant alike.
    const order = names.slice(rep % names.length).concat(names.slice(0, rep % names.length));
    for (const name of order) {
      const r = await measure(name, variants[name], rep, stream);
      runs[name].push(r);
      console.log(
        `  rep ${rep + 1} ${name.padEnd(12)} ${String(r.msgsPerSec).padStart(7)} msgs/s ${String(r.cpuUsPerMsg).padStart(5)} µs/msg Node ${String(r.nodePgCpuUsPerMsg ?? 'n/a').padStart(5)} Node+PG, load ${r.loadavg1}`,
      );
    }
  }
  byStream.push({ stream, runs });
}
/** One stream's medians and paired ratios, printed. */
function summarise({ stream, runs }) {
  const results = {};
  for (const [name, list] of Object.entries(runs)) {
    const med = (k) => Number(median(list.map((r) => r[k])).toFixed(2));
    results[name] = {
      name,
      mode: stream.mode,
      duplicates: stream.duplicates,
      failures: stream.failures,
      redeliveredPerRun: median(list.map((r) => r.redelivered)),
      msgsPerSec: Math.round(median(list.map((r) => r.msgsPerSec))),
      seconds: med('seconds'),
      p50Ms: med('p50Ms'),
      p99Ms: med('p99Ms'),
      roundTripsPerMsg: med('roundTripsPerMsg'),
      cpuUsPerMsg: Math.round(median(list.map((r) => r.cpuUsPerMsg))),
      nodePgCpuUsPerMsg: list.some((r) => r.nodePgCpuUsPerMsg === null)
        ? null
        : Math.round(median(list.map((r) => r.nodePgCpuUsPerMsg))),
      peakRssMb: Math.max(...list.map((r) => r.peakRssMb)),
      repMsgsPerSec: list.map((r) => r.msgsPerSec),
      repCpuUsPerMsg: list.map((r) => r.cpuUsPerMsg),
      repNodePgCpuUsPerMsg: list.map((r) => r.nodePgCpuUsPerMsg),
      repLoadavg1: list.map((r) => r.loadavg1),
    };
  }

  // Each ratio: the median of per-repetition paired ratios, with min–max.
  const paired = (a, b, value = (r) => r.msgsPerSec) => pairedRatio(runs[a], runs[b], value);
  const cpu = (r) => r.cpuUsPerMsg;
  const nodePg = (r) => r.nodePgCpuUsPerMsg;
  const withPg = (a, b) =>
    runs[a]?.concat(runs[b] ?? []).some((r) => nodePg(r) === null) ? undefined : paired(a, b, nodePg);
  const ratioDefs = [
    ['once/msg ÷ floor/msg', paired('once/msg', 'floor/msg'), 0.9, '≥'],
    ['once/batch ÷ floor/batch', paired('once/batch', 'floor/batch'), 0.9, '≥'],
    ['once/msg ÷ floor/msg, CPU µs/msg', paired('once/msg', 'floor/msg', cpu), 1.15, '≤'],
    ['once/batch ÷ floor/batch, CPU µs/msg', paired('once/batch', 'floor/batch', cpu), 1.15, '≤'],
    ['once/batch ÷ B1/batch', paired('once/batch', 'B1/batch'), 0.8, '≥'],
    ['once/batch ÷ once/msg', paired('once/batch', 'once/msg'), 4, '≥'],
    ['once/msg ÷ B1/msg', paired('once/msg', 'B1/msg'), 0.75, '≥'],
    ['floor/msg ÷ B1/msg', paired('floor/msg', 'B1/msg'), undefined, '≥'],
    ['floor/batch ÷ B1/batch', paired('floor/batch', 'B1/batch'), undefined, '≥'],
    ['floor/batch ÷ floor/msg', paired('floor/batch', 'floor/msg'), undefined, '≥'],
    ['once/batch ÷ raw', paired('once/batch', 'raw'), undefined, '≥'],
    ['once/msg ÷ floor/msg, Node+PG CPU', withPg('once/msg', 'floor/msg'), undefined, '≤'],
    ['once/batch ÷ floor/batch, Node+PG CPU', withPg('once/batch', 'floor/batch'), undefined, '≤'],
  ];
  const ratios = {};
  for (const [label, r, target, cmp] of ratioDefs) {
    if (!r) continue;
    const met = target === undefined ? undefined : cmp === '≥' ? r.median >= target : r.median <= target;
    ratios[label] = {
      value: Number(r.median.toFixed(2)),
      min: r.min,
      max: r.max,
      reps: r.n,
      target,
      cmp,
      met,
    };
  }

  console.log('');
  console.log(
    `medians of ${REPS} repetitions, ${stream.mode} stream (${stream.duplicates * 100} % duplicates, ${stream.failures * 100} % transient failures)`,
  );
  console.log(
    'variant        msgs/s   p50 ms   p99 ms   RT/msg   CPU µs/msg   +PG µs/msg   peak RSS MB   redelivered',
  );
  for (const r of Object.values(results)) {
    console.log(
      `${r.name.padEnd(12)} ${String(r.msgsPerSec).padStart(8)} ${String(r.p50Ms).padStart(8)} ${String(r.p99Ms).padStart(8)} ${String(r.roundTripsPerMsg).padStart(8)} ${String(r.cpuUsPerMsg).padStart(12)} ${String(r.nodePgCpuUsPerMsg ?? 'n/a').padStart(12)} ${String(r.peakRssMb).padStart(13)} ${String(r.redeliveredPerRun).padStart(13)}`,
    );
  }
  console.log('');
  console.log(`ratios, ${stream.mode} stream (median of paired repetitions [min–max])`);
  for (const [name, r] of Object.entries(ratios)) {
    const verdict =
      r.target === undefined ? '' : `(target ${r.cmp} ${r.target}: ${r.met ? 'met' : 'MISSED'})`;
    console.log(
      `${name.padEnd(38)} ${fmtRatio({ median: r.value, min: r.min, max: r.max }).padEnd(20)} ${verdict}`,
    );
  }
  return { results: Object.values(results), ratios };
}
const summaries = byStream.map(summarise);

mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
writeFileSync(
  new URL(`../results/${RESULTS}`, import.meta.url),
  `${JSON.stringify({ when: new Date().toISOString(), commit: gitCommit(), only: only ?? null, loadavgAtEnd: os.loadavg(), messages: N, partitions: PARTITIONS, slice: SLICE, concurrency: CONCURRENCY, retryMs: RETRY_MS, reps: REPS, cores: os.cpus().length, results: summaries.flatMap((x) => x.results), ratios: Object.fromEntries(byStream.map((x, i) => [x.stream.mode, summaries[i].ratios])) }, null, 2)}\n`,
);
await admin.deleteTopics({ topics: STREAMS.map(topicOf) }).catch(() => {});
await admin.disconnect();
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await monitor.end();
await raw.end();
