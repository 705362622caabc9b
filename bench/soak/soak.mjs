// Memory soak (issue #14, step 5), opt-in: `npm run bench -- --soak [kafka sqs rabbitmq nats]` or
// `node bench/soak/soak.mjs [broker ...]`. Per broker, SOAK_N messages (default 1,000,000;
// SOAK_N_KAFKA, SOAK_N_SQS, SOAK_N_RABBITMQ, SOAK_N_NATS override it) go through one once consumer
// in batch mode, in a process of its own (bench/soak/consumer.mjs, with --expose-gc) so that its
// RSS is the consumer's alone. This process publishes, keeping at most SOAK_BACKLOG (default
// 20,000) messages ahead of the consumer, so the broker never holds the whole run. Every 5 s the
// consumer samples RSS and heap, the heap also right after a full GC. Reported per broker: peak
// RSS, and over the second half of the messages the growth per 100k messages (least-squares slope
// of RSS and of heap-after-GC against messages processed). Targets: peak RSS < 200 MB, growth
// < 1 MB per 100k. SOAK_MAX_S caps a broker's run in seconds (it then reports how many it did).
// Queues, topics and streams are named `soak-…` and deleted after; so is the schema.
// Results: bench/results/soak.json (merged per broker, so brokers can be run one at a time).
import { fork } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import pg from 'pg';
import { gitCommit } from '../support/report.mjs';

const BROKERS = process.argv.slice(2).length ? process.argv.slice(2) : ['kafka', 'rabbitmq', 'nats', 'sqs'];
const BACKLOG = Number(process.env.SOAK_BACKLOG ?? 20_000);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const RESULTS = new URL('../results/soak.json', import.meta.url);
const MB = 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.log(`[${new Date().toISOString().slice(11, 19)}]`, ...a);
const nOf = (b) => Number(process.env[`SOAK_N_${b.toUpperCase()}`] ?? process.env.SOAK_N ?? 1_000_000);
const body = (i) => JSON.stringify({ id: i, amount: i % 100, pad: 'x'.repeat(64) });

/** Publishers per broker: `open(name)` → { publish(from, to), close() } (close deletes what it made). */
const brokers = {
  async kafka(name) {
    const { Kafka, logLevel } = await import('kafkajs');
    const kafka = new Kafka({
      clientId: `${name}-p`,
      brokers: ['127.0.0.1:9092'],
      logLevel: logLevel.NOTHING,
    });
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: name, numPartitions: 3 }], waitForLeaders: true });
    const producer = kafka.producer();
    await producer.connect();
    return {
      env: {},
      async publish(from, to) {
        const messages = [];
        for (let i = from; i < to; i++)
          messages.push({ key: `k${i % 97}`, value: body(i), headers: { 'message-id': `${name}-${i}` } });
        await producer.send({ topic: name, acks: -1, messages });
      },
      async close() {
        await producer.disconnect();
        await admin.deleteGroups([name]).catch(() => {});
        await admin.deleteTopics({ topics: [name] }).catch(() => {});
        await admin.disconnect();
      },
    };
  },
  async rabbitmq(name) {
    const amqp = (await import('amqplib')).default;
    const conn = await amqp.connect('amqp://guest:guest@127.0.0.1:5672');
    conn.on('error', () => {});
    const ch = await conn.createConfirmChannel();
    ch.on('error', () => {});
    await ch.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    return {
      env: {},
      async publish(from, to) {
        for (let i = from; i < to; i++) {
          if (!ch.sendToQueue(name, Buffer.from(body(i)), { persistent: true, messageId: `${name}-${i}` }))
            await new Promise((r) => ch.once('drain', r));
        }
        await ch.waitForConfirms();
      },
      async close() {
        for (const s of ['', '.quarantine', '.dead', '.retry.1000ms', '.retry.10000ms', '.retry.60000ms'])
          await ch.deleteQueue(name + s).catch(() => {});
        await ch.deleteExchange(`${name}.dlx`).catch(() => {});
        await conn.close();
      },
    };
  },
  async sqs(name) {
    const { SQSClient, CreateQueueCommand, DeleteQueueCommand, SendMessageBatchCommand } = await import(
      '@aws-sdk/client-sqs'
    );
    const sqs = new SQSClient({
      endpoint: 'http://127.0.0.1:9324',
      region: 'us-east-1',
      credentials: { accessKeyId: 'soak', secretAccessKey: 'soak' },
    });
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({ QueueName: name, Attributes: { VisibilityTimeout: '60' } }),
    );
    return {
      env: { SOAK_QUEUE_URL: QueueUrl },
      async publish(from, to) {
        const calls = [];
        for (let i = from; i < to; i += 10) {
          const Entries = [];
          for (let j = i; j < Math.min(to, i + 10); j++)
            Entries.push({
              Id: String(j - i),
              MessageBody: body(j),
              MessageAttributes: { 'message-id': { DataType: 'String', StringValue: `${name}-${j}` } },
            });
          calls.push(sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries })));
          if (calls.length >= 10) await Promise.all(calls.splice(0));
        }
        await Promise.all(calls);
      },
      async close() {
        await sqs.send(new DeleteQueueCommand({ QueueUrl })).catch(() => {});
        sqs.destroy();
      },
    };
  },
  async nats(name) {
    const { jetstream, jetstreamManager } = await import('@nats-io/jetstream');
    const { connect } = await import('@nats-io/transport-node');
    const nc = await connect({ servers: 'nats://127.0.0.1:4222', name: `${name}-p` });
    const jsm = await jetstreamManager(nc);
    const js = jetstream(nc);
    await jsm.streams.add({ name, subjects: [`${name}.in`] });
    return {
      env: {},
      async publish(from, to) {
        for (let i = from; i < to; i += 500) {
          const acks = [];
          for (let k = i; k < Math.min(to, i + 500); k++)
            acks.push(js.publish(`${name}.in`, body(k), { msgID: `${name}-${k}` }));
          await Promise.all(acks);
        }
      },
      async close() {
        await jsm.streams.delete(name).catch(() => {});
        await nc.close();
      },
    };
  },
};

/** Least-squares slope of y against x. */
function slope(xs, ys) {
  const n = xs.length;
  if (n < 2) return Number.NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) ** 2;
  }
  return sxy / sxx;
}

async function soak(broker) {
  const N = nOf(broker);
  const name = `soak-${broker}-${process.pid}`;
  const schema = `soak_${broker}_${process.pid}`;
  const pub = await brokers[broker](name);
  const child = fork(new URL('./consumer.mjs', import.meta.url), [broker, name, schema], {
    execArgv: ['--expose-gc'],
    env: { ...process.env, ...pub.env, SOAK_N: String(N) },
  });
  const samples = [];
  const errors = [];
  let processed = 0;
  let done;
  const finished = new Promise((resolve, reject) => {
    child.on('message', (m) => {
      if (m.type === 'sample') {
        samples.push(m);
        if (samples.length % 12 === 1)
          log(
            `  ${broker} ${m.processed.toLocaleString('en')} msgs, RSS ${(m.rss / MB).toFixed(0)} MB, heap after GC ${(m.heapAfterGc / MB).toFixed(1)} MB`,
          );
      }
      if (m.type === 'progress' || m.type === 'sample') processed = m.processed;
      if (m.type === 'error') errors.push(m.message);
      if (m.type === 'done') done = m;
    });
    child.on('exit', (code) =>
      code === 0 && done ? resolve(done) : reject(new Error(`${broker} consumer exited ${code}`)),
    );
  });
  log(`${broker}: ${N.toLocaleString('en')} messages through ${name}`);
  let produced = 0;
  const t0 = performance.now();
  const producing = (async () => {
    while (produced < N && !done) {
      if (produced - processed >= BACKLOG) {
        await sleep(100);
        continue;
      }
      const to = Math.min(N, produced + 1000);
      await pub.publish(produced, to);
      produced = to;
    }
  })();
  let end;
  try {
    await Promise.all([producing, finished]);
    end = done;
  } finally {
    if (child.exitCode === null) child.kill();
    await pub.close();
    const pool = new pg.Pool({ connectionString: DB_URL, max: 1 });
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await pool.end();
  }
  const second = samples.filter((s) => s.processed >= end.processed / 2);
  const per100k = (k) =>
    (slope(
      second.map((s) => s.processed),
      second.map((s) => s[k]),
    ) *
      100_000) /
    MB;
  const r = {
    broker,
    messagesTarget: N,
    messages: end.processed,
    seconds: end.seconds,
    msgsPerSec: end.processed / end.seconds,
    cpuUsPerMsg: end.cpuUsPerMsg,
    samples: samples.length,
    peakRssMB: Math.max(...samples.map((s) => s.rss)) / MB,
    peakHeapMB: Math.max(...samples.map((s) => s.heapUsed)) / MB,
    firstRssMB: samples[0].rss / MB,
    lastRssMB: samples.at(-1).rss / MB,
    secondHalf: {
      samples: second.length,
      rssGrowthMBPer100k: per100k('rss'),
      heapAfterGcGrowthMBPer100k: per100k('heapAfterGc'),
      heapAfterGcFirstMB: second[0]?.heapAfterGc / MB,
      heapAfterGcLastMB: second.at(-1)?.heapAfterGc / MB,
    },
    errors: errors.slice(0, 5),
    trace: samples.map((s) => [
      Math.round(s.s),
      s.processed,
      Math.round(s.rss / 1e5) / 10,
      Math.round(s.heapAfterGc / 1e5) / 10,
      Math.round(s.external / 1e5) / 10,
      Math.round(s.arrayBuffers / 1e5) / 10,
    ]),
  };
  log(
    `${broker}: ${r.messages.toLocaleString('en')} msgs in ${r.seconds.toFixed(0)} s (${r.msgsPerSec.toFixed(0)} msgs/s, ${r.cpuUsPerMsg.toFixed(0)} µs CPU/msg); ` +
      `peak RSS ${r.peakRssMB.toFixed(0)} MB (target < 200); second half: RSS ${r.secondHalf.rssGrowthMBPer100k.toFixed(2)} MB/100k, ` +
      `heap after GC ${r.secondHalf.heapAfterGcGrowthMBPer100k.toFixed(3)} MB/100k (target < 1); wall ${((performance.now() - t0) / 1000).toFixed(0)} s`,
  );
  return r;
}

for (const b of BROKERS) {
  const r = await soak(b);
  // Read just before writing: soaks of other brokers may be running beside this one.
  const previous = existsSync(RESULTS) ? JSON.parse(readFileSync(RESULTS, 'utf8')) : { results: {} };
  previous.results[b] = { ...r, at: new Date().toISOString(), commit: gitCommit() };
  // One line per trace row: [1, 2, 3] instead of one number per line.
  const compact = (text) =>
    text.replace(/\[\s+([-\d.,\s]+?)\s+\]/g, (_, xs) => `[${xs.split(/,\s*/).join(', ')}]`);
  writeFileSync(
    RESULTS,
    `${compact(
      JSON.stringify(
        {
          note: 'trace rows: [seconds, messages processed, RSS MB, heap after GC MB, external MB, arrayBuffers MB] (runs before the last two were added have four)',
          machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
          targets: { peakRssMB: 200, growthMBPer100k: 1 },
          sampleSeconds: Number(process.env.SOAK_SAMPLE_S ?? 5),
          backlog: BACKLOG,
          results: previous.results,
        },
        null,
        2,
      ),
    )}\n`,
  );
}
