// Kafka benchmark, per client library (issue #30, "Speed"): for each of kafkajs,
// @platformatic/kafka and @confluentinc/kafka-javascript, @once/kafka through that client's entry
// against the floor written by hand on that same library, in one run, interleaved.
//   floor/msg, floor/batch  the floor (bench/support/floor.mjs, a frozen hand-written inbox) in a
//              consumer written on the client library: one transaction per message (BEGIN; claim;
//              INSERT effect; COMMIT), or one per slice of BENCH_SLICE messages; offsets committed
//              only after COMMIT (bench/kafka/clients/<client>.mjs says how on each library).
//   once/msg   createKafkaConsumer({ batch: false }) on the client's entry: one transaction per message.
//   once/batch createKafkaConsumer({ batch: true, batchSize: BENCH_SLICE }).
//   kafkajs only: raw (eachBatch, no database: the ceiling), B1/msg and B1/batch (plain kafkajs
//              eachMessage / eachBatch, the same transactions without an inbox).
// The entries: `@once/kafka/kafkajs` (kafkajs(new Kafka(...))), `@once/kafka/platformatic`
// (platformatic({ clientId, bootstrapBrokers }, { consumer })), `@once/kafka/confluent`
// (confluent(new KafkaJS.Kafka({ kafkaJS: { brokers } }), { consumer })).
// Clients: BENCH_KAFKA_CLIENTS=kafkajs,platformatic,confluent (default: all three). A client whose
// library does not resolve (Confluent's is installed by `bash scripts/confluent-install --link`,
// never by npm), or whose once entry does not, is reported as absent, with the reason, in the
// output and the results file; its other variants still run.
// Reported per client: once ÷ floor per message and batched (target ≥ 0.9), Node CPU once ÷ floor
// (≤ 1.15), batched ÷ per message (once: target ≥ 4); and the clients side by side (msgs/s and
// Node CPU µs per message of each variant, and each client ÷ kafkajs per variant, paired).
// BENCH_REPS interleaved repetitions (default 7), every variant of every client in each, in a
// rotating order, each on a fresh consumer group; per variant the median; ratios are the median of
// per-repetition paired ratios [min–max].
// All variants read BENCH_MESSAGES messages pre-produced (by kafkajs) to one 6-partition topic per
// stream, 3 partitions at a time (BENCH_CONCURRENCY), and write the same effect row per message.
// Latency is per message from the start of its transaction (or slice) to its COMMIT: the messages
// are pre-produced, so produce-to-effect time would only measure the backlog.
// CPU per message: Node (this process) and, where the server's backends can be read from /proc,
// Node plus the bench's own PostgreSQL backends (named by application_name, so another program's
// statements on a shared server are not counted; bench/support/proc-cpu.mjs, backendCpu).
// Confluent's librdkafka threads run inside this process, so its Node CPU includes them.
// A client without offset-commit metadata (platformatic: `commitMetadata: false`, see
// packages/kafka/src/client/types.ts) has once run the first batch of each newly assigned partition
// one message at a time, its start counted in PostgreSQL. Every run here is a fresh group on a
// pre-produced backlog, so that first batch can be most of the run: once's figures on such a client
// are the cost after an assignment, not its steady state.
// Size: BENCH_MESSAGES (default 20000; the issue's full size is 200000), BENCH_ONLY=name,name (a
// variant's short name, `floor/msg`, or its full name, `platformatic floor/msg`), BENCH_SCHEMA
// (default once_bench_kafka), BENCH_RESULTS (the file under bench/results/, default kafka.json).
// Streams (bench/support/faults.mjs; BENCH_STREAMS=clean,faults, default both), each on its own
// topic: clean, and faults, where 5 % of the messages are produced twice and 5 % throw after their
// effect on the first attempt. Every variant runs a failed attempt again in place, on its
// partition, after BENCH_RETRY_MS (default 0): once through its retry (retryDelayMs, waited in
// place as its inlineRetryMaxMs allows), B1 and the floor in their own loop (untilCommitted below),
// offsets committed only after a COMMIT. Every run checks its effects: each id once (B1,
// without an inbox: each copy once). A run with no message done for BENCH_STALL_MS (default 60 s),
// or whose consumer reports an error, fails the bench, naming the variant, the repetition and how
// many messages were done.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate } from '@once/core';
import { createKafkaConsumer } from '@once/kafka';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { countingPool } from '../support/counting-pool.mjs';
import { checkEffects, faultRun, streamsFromEnv } from '../support/faults.mjs';
import { createFloorTable } from '../support/floor.mjs';
import { doneCount } from '../support/measure.mjs';
import { backendCpu } from '../support/proc-cpu.mjs';
import { fmtRatio, gitCommit, median, pairedRatio } from '../support/report.mjs';

const CLIENTS = ['kafkajs', 'platformatic', 'confluent'];
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

const wantedClients = (process.env.BENCH_KAFKA_CLIENTS ?? CLIENTS.join(','))
  .split(',')
  .map((c) => c.trim())
  .filter(Boolean);
const unknownClients = wantedClients.filter((c) => !CLIENTS.includes(c));
if (wantedClients.length === 0 || unknownClients.length > 0)
  throw new Error(
    `BENCH_KAFKA_CLIENTS: expected some of ${CLIENTS.join(', ')}, got "${process.env.BENCH_KAFKA_CLIENTS}"`,
  );

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

// Producing and the topics stay on kafkajs for every client, so each reads the same messages.
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
/** The current run's failure: a consumer's error fails the run (and the bench) at once. */
let failRun = () => {};
/** The effect every variant writes, then the stream's transient failure (so it rolls back). */
async function effect(q, variant, id, amount) {
  await q.query(EFFECT, [variant, id, amount]);
  run.fail(id);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The plain consumers' retry (B1 and the floor, on every client): `attempt()` (one transaction over
 * `n` messages) runs again after RETRY_MS while it fails with the stream's transient failure, each
 * failed attempt counted; anything else is thrown to the client. In place, as once retries a short
 * delay, not by throwing the failure to the client: kafkajs 2.2.4 answers an error from
 * eachMessage or eachBatch by ending the fetch round of every partition and running its whole
 * fetch loop again under the consumer's `retry` backoff (5 retries, from 300 ms, doubling), whose
 * count successes do not reset (kafkajs issue #1415). With one message in twenty failing, each
 * round every partition stopped at its next failure, the waits grew, and every sixth failed round
 * crashed the consumer (KafkaJSNumberOfRetriesExceeded), which kafkajs restarts after another
 * wait: at 20,000 messages B1/msg did about 40 messages a second and looked idle.
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

/** The installed version of `pkg`, read from its package.json (found from its resolved entry). */
function versionOf(pkg) {
  try {
    let dir = path.dirname(fileURLToPath(import.meta.resolve(pkg)));
    for (;;) {
      const file = path.join(dir, 'package.json');
      if (existsSync(file)) {
        const json = JSON.parse(readFileSync(file, 'utf8'));
        if (json.name === pkg) return json.version;
      }
      const up = path.dirname(dir);
      if (up === dir) return undefined;
      dir = up;
    }
  } catch {
    return undefined;
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

/** What a client module (bench/kafka/clients/<client>.mjs) gets: the run's settings and helpers. */
const context = {
  run: RUN,
  brokers: BROKERS,
  pool,
  schema: SCHEMA,
  slice: SLICE,
  concurrency: CONCURRENCY,
  settings: consumerSettings,
  topic: () => TOPIC,
  effect,
  untilCommitted,
  fail: (err) => failRun(err),
  versionOf,
};

/**
 * The check every run ends with, after its consumer stopped: the group's committed offset of each
 * partition is the partition's end (offsets are committed only after COMMIT, so this also says
 * every message's transaction was committed before the bench moved on). Throws, naming the
 * variant and the partitions behind, if not.
 */
async function checkCommitted(name, group) {
  const ends = await admin.fetchTopicOffsets(TOPIC);
  const [committed] = await admin.fetchOffsets({ groupId: group, topics: [TOPIC] });
  const at = new Map(committed.partitions.map((p) => [p.partition, p.offset]));
  const behind = ends.filter((e) => at.get(e.partition) !== e.high);
  if (behind.length > 0)
    throw new Error(
      `${name}: committed offsets short of the end after stop: ${behind.map((e) => `partition ${e.partition} at ${at.get(e.partition)} of ${e.high}`).join(', ')}`,
    );
}

/**
 * Runs one variant until it has handled every published message; returns its measurements.
 * Fails, naming the variant and the repetition, if no message is done for BENCH_STALL_MS or the
 * variant's consumer reports an error.
 */
async function measure(variant, rep, stream) {
  const { name, short } = variant;
  run = faultRun(stream, N, (k) => `order-${k}`);
  TOPIC = topicOf(stream);
  redelivered = 0;
  await raw.query(`TRUNCATE ${SCHEMA}.effects, ${SCHEMA}.inbox, ${SCHEMA}.floor_inbox CASCADE`);
  const latencies = [];
  const label = `kafka ${name} (${stream.mode} stream, repetition ${rep + 1} of ${REPS})`;
  const done = doneCount({ total: run.published, label });
  const failed = new Promise((_, reject) => {
    failRun = (err) =>
      reject(
        new Error(`${label}: ${err?.message ?? err}, ${done.done} of ${run.published} messages done`, {
          cause: err,
        }),
      );
  });
  failed.catch(() => {});
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
  const group = `${RUN}-${variant.client}-${short.replace('/', '')}-${stream.mode}-${rep}`;
  const stop = await variant.start(progress, group);
  const t0 = performance.now();
  await Promise.race([done.finished, failed]);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const pgSeconds = await backendCpu(monitor, RUN, pg0);
  const trips = counter.trips - rt0;
  await stop();
  failRun = () => {};
  clearInterval(sampler);
  await checkCommitted(name, group);
  if (short !== 'raw') {
    const { rows } = await raw.query(
      `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${SCHEMA}.effects`,
    );
    checkEffects({
      variant: name,
      stream,
      rows: rows[0].n,
      ids: rows[0].d,
      run,
      dedup: !short.startsWith('B1'),
    });
  }
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  return {
    name,
    client: variant.client,
    variant: short,
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

/** once's two variants on a client: `makeClient()` is a fresh once client of that library. */
function onceVariants(makeClient, extra) {
  const out = {};
  for (const [short, mode] of [
    ['once/msg', 'message'],
    ['once/batch', 'batch'],
  ]) {
    out[short] = async (progress, group) => {
      const variant = `once${mode}`;
      const c = createKafkaConsumer({
        kafka: makeClient(),
        groupId: group,
        topics: [TOPIC],
        pool,
        schema: SCHEMA,
        batch: mode === 'batch',
        batchSize: SLICE,
        concurrency: CONCURRENCY,
        fromBeginning: true,
        deadLetterTopic: false,
        retryDelayMs: () => RETRY_MS,
        ...extra,
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
  return out;
}

/** Why an import failed, in one line. */
const why = (err) => String(err?.message ?? err).split('\n')[0];

// The clients: each one's library, floor and once entry; what does not resolve is reported absent.
const clients = [];
const absent = [];
for (const client of wantedClients) {
  let loaded;
  try {
    loaded = await (await import(`./clients/${client}.mjs`)).load(context);
  } catch (err) {
    absent.push({ client, what: 'library', reason: why(err) });
    continue;
  }
  const variants = { ...loaded.variants };
  try {
    const makeClient = await loaded.onceClient();
    Object.assign(variants, onceVariants(makeClient, loaded.onceOptions));
  } catch (err) {
    absent.push({ client, what: 'once entry', reason: why(err) });
  }
  clients.push({ client, version: loaded.version, variants });
}
const only = process.env.BENCH_ONLY?.split(',');
const all = clients.flatMap(({ client, variants }) =>
  Object.entries(variants)
    .map(([short, start]) => ({ client, short, name: `${client} ${short}`, start }))
    .filter((v) => !only || only.includes(v.short) || only.includes(v.name)),
);

/** Deletes the run's topics and schema and closes the connections (also when a run fails). */
async function cleanup() {
  // A deleted topic came back once, empty with one partition (the broker's auto-creation, asked for
  // by some client's metadata request; seen on a busy machine, not reproduced on demand): the
  // topics are looked for again after a second and deleted again if back.
  let topics = STREAMS.map(topicOf);
  for (let attempt = 1; topics.length > 0; attempt++) {
    try {
      await admin.deleteTopics({ topics, timeout: 30_000 });
    } catch (err) {
      if (attempt === 3) {
        console.log(`kafka bench: topics ${topics.join(', ')} not deleted (${why(err)})`);
        break;
      }
    }
    await sleep(1_000);
    const left = new Set(await admin.listTopics());
    topics = topics.filter((t) => left.has(t));
    if (topics.length > 0 && attempt === 3) {
      console.log(`kafka bench: topics ${topics.join(', ')} came back after deletion; left in place`);
      break;
    }
  }
  await admin.disconnect();
  await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await monitor.end();
  await raw.end();
}

const byStream = [];
try {
  const produceMs = {};
  for (const stream of STREAMS) produceMs[stream.mode] = Math.round(await produce(stream));
  console.log(
    `kafka bench: ${N} messages on ${PARTITIONS} partitions (produced in ${JSON.stringify(produceMs)} ms), slice ${SLICE}, ${CONCURRENCY} partitions at a time, retry after ${RETRY_MS} ms, ${os.cpus().length} cores`,
  );
  console.log(
    `clients: ${clients.map((c) => `${c.client} ${c.version ?? '(version unknown)'}`).join(', ') || 'none'}`,
  );
  for (const a of absent) console.log(`absent: ${a.client} ${a.what} (${a.reason})`);
  if (all.length === 0) throw new Error('kafka bench: no variant to run (BENCH_KAFKA_CLIENTS, BENCH_ONLY)');

  for (const stream of STREAMS) {
    const runs = Object.fromEntries(all.map((v) => [v.name, []]));
    console.log(`\n${stream.mode} stream`);
    for (let rep = 0; rep < REPS; rep++) {
      // Interleaved, in a rotating order, so a noisy neighbour slows every variant alike.
      const order = all.slice(rep % all.length).concat(all.slice(0, rep % all.length));
      for (const v of order) {
        const r = await measure(v, rep, stream);
        runs[v.name].push(r);
        console.log(
          `  rep ${rep + 1} ${v.name.padEnd(24)} ${String(r.msgsPerSec).padStart(7)} msgs/s ${String(r.cpuUsPerMsg).padStart(5)} µs/msg Node ${String(r.nodePgCpuUsPerMsg ?? 'n/a').padStart(5)} Node+PG, load ${r.loadavg1}`,
        );
      }
    }
    byStream.push({ stream, runs });
  }
} catch (err) {
  await cleanup().catch(() => {});
  throw err;
}

/** The ratios of one client's own variants: [label, a, b, value, target, cmp] (names without the client). */
const perClientRatios = [
  ['once/msg ÷ floor/msg', 'once/msg', 'floor/msg', 'rate', 0.9, '≥'],
  ['once/batch ÷ floor/batch', 'once/batch', 'floor/batch', 'rate', 0.9, '≥'],
  ['once/msg ÷ floor/msg, CPU µs/msg', 'once/msg', 'floor/msg', 'cpu', 1.15, '≤'],
  ['once/batch ÷ floor/batch, CPU µs/msg', 'once/batch', 'floor/batch', 'cpu', 1.15, '≤'],
  ['once/batch ÷ once/msg', 'once/batch', 'once/msg', 'rate', 4, '≥'],
  ['floor/batch ÷ floor/msg', 'floor/batch', 'floor/msg', 'rate', undefined, '≥'],
  ['once/batch ÷ B1/batch', 'once/batch', 'B1/batch', 'rate', 0.8, '≥'],
  ['once/msg ÷ B1/msg', 'once/msg', 'B1/msg', 'rate', 0.75, '≥'],
  ['floor/msg ÷ B1/msg', 'floor/msg', 'B1/msg', 'rate', undefined, '≥'],
  ['floor/batch ÷ B1/batch', 'floor/batch', 'B1/batch', 'rate', undefined, '≥'],
  ['once/batch ÷ raw', 'once/batch', 'raw', 'rate', undefined, '≥'],
  ['once/msg ÷ floor/msg, Node+PG CPU', 'once/msg', 'floor/msg', 'nodePg', undefined, '≤'],
  ['once/batch ÷ floor/batch, Node+PG CPU', 'once/batch', 'floor/batch', 'nodePg', undefined, '≤'],
];
const VALUE = {
  rate: (r) => r.msgsPerSec,
  cpu: (r) => r.cpuUsPerMsg,
  nodePg: (r) => r.nodePgCpuUsPerMsg,
};
const SHORTS = ['raw', 'B1/msg', 'B1/batch', 'floor/msg', 'floor/batch', 'once/msg', 'once/batch'];

/** A ratio entry for the results file, with its verdict. */
function ratioEntry(r, target, cmp) {
  const met = target === undefined ? undefined : cmp === '≥' ? r.median >= target : r.median <= target;
  return { value: Number(r.median.toFixed(2)), min: r.min, max: r.max, reps: r.n, target, cmp, met };
}
function printRatio(label, r) {
  const verdict = r.target === undefined ? '' : `(target ${r.cmp} ${r.target}: ${r.met ? 'met' : 'MISSED'})`;
  console.log(
    `  ${label.padEnd(48)} ${fmtRatio({ median: r.value, min: r.min, max: r.max }).padEnd(20)} ${verdict}`,
  );
}

/** One stream's medians and paired ratios (per client, then clients side by side), printed. */
function summarise({ stream, runs }) {
  const results = {};
  for (const [name, list] of Object.entries(runs)) {
    const med = (k) => Number(median(list.map((r) => r[k])).toFixed(2));
    results[name] = {
      name,
      client: list[0].client,
      variant: list[0].variant,
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

  console.log('');
  console.log(
    `medians of ${REPS} repetitions, ${stream.mode} stream (${stream.duplicates * 100} % duplicates, ${stream.failures * 100} % transient failures)`,
  );
  console.log(
    'variant                     msgs/s   p50 ms   p99 ms   RT/msg   CPU µs/msg   +PG µs/msg   peak RSS MB   redelivered',
  );
  for (const r of Object.values(results)) {
    console.log(
      `${r.name.padEnd(25)} ${String(r.msgsPerSec).padStart(8)} ${String(r.p50Ms).padStart(8)} ${String(r.p99Ms).padStart(8)} ${String(r.roundTripsPerMsg).padStart(8)} ${String(r.cpuUsPerMsg).padStart(12)} ${String(r.nodePgCpuUsPerMsg ?? 'n/a').padStart(12)} ${String(r.peakRssMb).padStart(13)} ${String(r.redeliveredPerRun).padStart(13)}`,
    );
  }

  // Per client: each ratio the median of per-repetition paired ratios, with min–max.
  const ratios = {};
  for (const { client } of clients) {
    const own = (short) => runs[`${client} ${short}`];
    const entries = {};
    for (const [label, a, b, kind, target, cmp] of perClientRatios) {
      if (
        kind === 'nodePg' &&
        own(a)
          ?.concat(own(b) ?? [])
          .some((r) => r.nodePgCpuUsPerMsg === null)
      )
        continue;
      const r = pairedRatio(own(a), own(b), VALUE[kind]);
      if (r) entries[label] = ratioEntry(r, target, cmp);
    }
    if (Object.keys(entries).length === 0) continue;
    ratios[client] = entries;
    console.log(`\n${client}: ratios, ${stream.mode} stream (median of paired repetitions [min–max])`);
    for (const [label, r] of Object.entries(entries)) printRatio(label, r);
  }

  // Side by side: each variant on each client, and each client ÷ kafkajs, paired per repetition.
  const ran = clients.map((c) => c.client).filter((c) => SHORTS.some((s) => runs[`${c} ${s}`]));
  const cell = (r) => (r ? `${r.msgsPerSec} / ${r.cpuUsPerMsg}` : '-');
  console.log(`\nclients side by side, ${stream.mode} stream: msgs/s / Node CPU µs per message (medians)`);
  console.log(`  ${'variant'.padEnd(12)} ${ran.map((c) => c.padStart(16)).join(' ')}`);
  for (const short of SHORTS) {
    if (!ran.some((c) => results[`${c} ${short}`])) continue;
    console.log(
      `  ${short.padEnd(12)} ${ran.map((c) => cell(results[`${c} ${short}`]).padStart(16)).join(' ')}`,
    );
  }
  const versus = {};
  for (const client of ran.filter((c) => c !== 'kafkajs')) {
    for (const short of SHORTS) {
      for (const [kind, what] of [
        ['rate', 'msgs/s'],
        ['cpu', 'CPU µs/msg'],
      ]) {
        const r = pairedRatio(runs[`${client} ${short}`], runs[`kafkajs ${short}`], VALUE[kind]);
        if (r)
          versus[`${client} ÷ kafkajs, ${short}, ${what}`] = ratioEntry(
            r,
            undefined,
            kind === 'rate' ? '≥' : '≤',
          );
      }
    }
  }
  if (Object.keys(versus).length > 0) {
    console.log(`\nclients ÷ kafkajs, ${stream.mode} stream (median of paired repetitions [min–max])`);
    for (const [label, r] of Object.entries(versus)) printRatio(label, r);
  }
  return { results: Object.values(results), ratios, versus };
}
const summaries = byStream.map(summarise);
if (absent.length > 0) console.log('');
for (const a of absent) console.log(`absent: ${a.client} ${a.what} (${a.reason})`);

await cleanup();
mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
writeFileSync(
  new URL(`../results/${RESULTS}`, import.meta.url),
  `${JSON.stringify(
    {
      when: new Date().toISOString(),
      commit: gitCommit(),
      clients: clients.map((c) => ({ client: c.client, version: c.version ?? null })),
      absent,
      only: only ?? null,
      loadavgAtEnd: os.loadavg(),
      messages: N,
      partitions: PARTITIONS,
      slice: SLICE,
      concurrency: CONCURRENCY,
      retryMs: RETRY_MS,
      reps: REPS,
      cores: os.cpus().length,
      node: process.version,
      results: summaries.flatMap((x) => x.results),
      ratios: Object.fromEntries(byStream.map((x, i) => [x.stream.mode, summaries[i].ratios])),
      clientsVersusKafkajs: Object.fromEntries(byStream.map((x, i) => [x.stream.mode, summaries[i].versus])),
    },
    null,
    2,
  )}\n`,
);
