// SQS benchmark: once's poller against the no-dedup baseline B1 over the same ElasticMQ FIFO
// queue shape, run side by side in one process (interleaved, each on its own pre-filled queue).
// B1 receives with the same receivers, keeps group order the same way (groups of a receive in
// parallel, one group's messages one after another), writes the same effect and deletes each
// receive's messages in one DeleteMessageBatch: per message (one transaction each) and batched
// (one transaction per receive). ElasticMQ is the ceiling here, so once's own cost is also shown
// as Node CPU and Postgres round trips per message.
// Size: BENCH_SQS_N messages over BENCH_SQS_GROUPS groups (default 4000 over 50; the full
// size is 20000: BENCH_SQS_N=20000), BENCH_SQS_REPS repetitions (median). Run after `npm run build`.
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import pg from 'pg';
import { migrate } from '../../packages/core/dist/index.js';
import { createSqsConsumer } from '../../packages/sqs/dist/index.js';
import { countingPool } from '../support/counting-pool.mjs';

const N = Number(process.env.BENCH_SQS_N ?? 4000);
const GROUPS = Number(process.env.BENCH_SQS_GROUPS ?? 50);
const REPS = Number(process.env.BENCH_SQS_REPS ?? 3);
// B1 loops receive, process and delete in turn, so it needs several. once keeps receiving while it
// processes; it runs with its default of one receiver and with as many as B1.
const RECEIVERS = Number(process.env.BENCH_SQS_RECEIVERS ?? 4);
const MAX_IN_FLIGHT = Number(process.env.BENCH_SQS_MAX_IN_FLIGHT ?? RECEIVERS * 10);
/** Comma-separated substrings; only variants whose name contains one run (B1 baselines always run). */
const ONLY = process.env.BENCH_SQS_ONLY?.split(',');
const CONCURRENCY = 10;
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ENDPOINT = process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324';
const SCHEMA = 'once_bench_sqs';

const sqs = new SQSClient({
  endpoint: ENDPOINT,
  region: 'us-east-1',
  credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
});
let sqsCalls = 0;
let receives = 0;
let receiveMs = 0;
// Counts every SQS request (ElasticMQ's work, and most of the Node CPU of an SQS consumer) and
// times receives (long polls that wait for messages included).
sqs.middlewareStack.add(
  (next, context) => async (args) => {
    sqsCalls++;
    if (context.commandName !== 'ReceiveMessageCommand') return next(args);
    const t = performance.now();
    try {
      return await next(args);
    } finally {
      receives++;
      receiveMs += performance.now() - t;
    }
  },
  { step: 'initialize', name: 'countCalls' },
);
const raw = new pg.Pool({ connectionString: DB_URL, max: CONCURRENCY + 2 });
raw.on('error', () => {});
const { pool, counter } = countingPool(raw);

await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(raw, { schema: SCHEMA });
await raw.query(`CREATE TABLE ${SCHEMA}.effects (id text NOT NULL, grp text, n int NOT NULL)`);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (id, grp, n) VALUES ($1, $2, $3)`;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let queueNo = 0;

async function filledQueue() {
  const name = `bench-sqs-${process.pid}-${Date.now().toString(36)}-${queueNo++}.fifo`;
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: 'true', VisibilityTimeout: '30' } }),
  );
  const calls = [];
  for (let i = 0; i < N; i += 10) {
    const Entries = [];
    for (let j = i; j < Math.min(N, i + 10); j++) {
      Entries.push({
        Id: String(j - i),
        MessageBody: JSON.stringify({ n: j, amount: 7 }),
        MessageGroupId: `g${j % GROUPS}`,
        MessageDeduplicationId: `d${j}`,
        MessageAttributes: { 'message-id': { DataType: 'String', StringValue: `${name}-${j}` } },
      });
    }
    calls.push(Entries);
  }
  // One call after another keeps each group's messages in order.
  for (const Entries of calls) {
    const res = await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries }));
    if (res.Failed?.length) throw new Error(`send failed: ${JSON.stringify(res.Failed[0])}`);
  }
  return QueueUrl;
}

const effectsCount = async () =>
  Number((await raw.query(`SELECT count(*) AS n FROM ${SCHEMA}.effects`)).rows[0].n);

/** B1: receive, effect without dedup, delete the receive's messages in one batch call. */
async function baseline(url, batched) {
  let stop = false;
  let done = 0;
  const loop = async () => {
    while (!stop) {
      const res = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      const msgs = res.Messages ?? [];
      if (msgs.length === 0) continue;
      const row = (m) => [
        m.MessageAttributes['message-id'].StringValue,
        m.Attributes.MessageGroupId,
        JSON.parse(m.Body).n,
      ];
      if (batched) {
        const c = await pool.connect();
        try {
          await c.query('BEGIN');
          for (const m of msgs) await c.query(EFFECT, row(m));
          await c.query('COMMIT');
        } finally {
          c.release();
        }
      } else {
        const byGroup = new Map();
        for (const m of msgs) {
          const g = m.Attributes.MessageGroupId;
          if (!byGroup.has(g)) byGroup.set(g, []);
          byGroup.get(g).push(m);
        }
        await Promise.all(
          [...byGroup.values()].map(async (list) => {
            for (const m of list) {
              const c = await pool.connect();
              try {
                await c.query('BEGIN');
                await c.query(EFFECT, row(m));
                await c.query('COMMIT');
              } finally {
                c.release();
              }
            }
          }),
        );
      }
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
        }),
      );
      done += msgs.length;
    }
  };
  const loops = Array.from({ length: RECEIVERS }, loop);
  while (done < N) await sleep(20);
  stop = true;
  await Promise.all(loops);
}

async function once(url, batch, receivers) {
  const consumer = createSqsConsumer({
    client: sqs,
    queueUrl: url,
    pool,
    schema: SCHEMA,
    consumer: `bench-${url}`,
    batch,
    deadLetterQueueUrl: false,
    receivers,
    maxInFlight: MAX_IN_FLIGHT,
    ...(process.env.BENCH_SQS_LINGER_MS ? { settleLingerMs: Number(process.env.BENCH_SQS_LINGER_MS) } : {}),
    concurrency: CONCURRENCY,
    waitTimeSeconds: 1,
    handler: async (e, { tx, id }) => {
      await tx.query(EFFECT, [id, e.key, JSON.parse(e.body.toString()).n]);
    },
  });
  let done = 0;
  consumer.inbox.on('message:processed', () => done++);
  await consumer.start();
  while (done < N) await sleep(20);
  await consumer.stop();
}

const variants = [
  { name: 'B1 no-dedup/msg', run: (url) => baseline(url, false), pair: 'msg' },
  { name: 'once/msg, 1 receiver', run: (url) => once(url, false, 1), pair: 'msg' },
  { name: `once/msg, ${RECEIVERS} receivers`, run: (url) => once(url, false, RECEIVERS), pair: 'msg' },
  { name: 'B1 no-dedup/batch', run: (url) => baseline(url, true), pair: 'batch' },
  { name: 'once/batch, 1 receiver', run: (url) => once(url, true, 1), pair: 'batch' },
  { name: `once/batch, ${RECEIVERS} receivers`, run: (url) => once(url, true, RECEIVERS), pair: 'batch' },
];

if (ONLY) {
  for (let i = variants.length - 1; i >= 0; i--) {
    const v = variants[i];
    if (!v.name.startsWith('B1') && !ONLY.some((o) => v.name.includes(o))) variants.splice(i, 1);
  }
  for (let i = variants.length - 1; i >= 0; i--) {
    const v = variants[i];
    if (v.name.startsWith('B1') && !variants.some((o) => o.pair === v.pair && o !== v)) variants.splice(i, 1);
  }
}
const results = new Map(variants.map((v) => [v.name, []]));
for (let rep = 0; rep < REPS; rep++) {
  for (const v of variants) {
    const url = await filledQueue();
    await raw.query(`TRUNCATE ${SCHEMA}.effects`);
    counter.trips = 0;
    sqsCalls = 0;
    receives = 0;
    receiveMs = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await v.run(url);
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const effects = await effectsCount();
    results.get(v.name).push({
      msgsPerSec: (N / ms) * 1000,
      cpuUsPerMsg: (cpu.user + cpu.system) / N,
      roundTripsPerMsg: counter.trips / N,
      sqsCallsPerMsg: sqsCalls / N,
      receiveMs: receiveMs / Math.max(1, receives),
      effects,
      rssMiB: process.memoryUsage().rss / 2 ** 20,
    });
    await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = variants.map((v) => {
  const rs = results.get(v.name);
  return {
    variant: v.name,
    pair: v.pair,
    msgsPerSec: median(rs.map((r) => r.msgsPerSec)),
    cpuUsPerMsg: median(rs.map((r) => r.cpuUsPerMsg)),
    roundTripsPerMsg: median(rs.map((r) => r.roundTripsPerMsg)),
    sqsCallsPerMsg: median(rs.map((r) => r.sqsCallsPerMsg)),
    receiveMs: median(rs.map((r) => r.receiveMs)),
    effects: rs.map((r) => r.effects),
    rssMiB: Math.max(...rs.map((r) => r.rssMiB)),
  };
});
for (const r of rows) {
  const base = rows.find((b) => b.pair === r.pair && b.variant.startsWith('B1'));
  r.vsB1 = r.msgsPerSec / base.msgsPerSec;
  r.cpuOverB1UsPerMsg = r.cpuUsPerMsg - base.cpuUsPerMsg;
}

console.log(
  `SQS (ElasticMQ FIFO), ${N} messages over ${GROUPS} groups, ${REPS} rep(s), B1 ${RECEIVERS} receive loops; once holds up to ${MAX_IN_FLIGHT}`,
);
console.table(
  rows.map((r) => ({
    variant: r.variant,
    'msg/s': Math.round(r.msgsPerSec),
    'x B1': r.vsB1.toFixed(2),
    'cpu µs/msg': Math.round(r.cpuUsPerMsg),
    'pg round trips/msg': r.roundTripsPerMsg.toFixed(2),
    'sqs calls/msg': r.sqsCallsPerMsg.toFixed(2),
    'receive ms': r.receiveMs.toFixed(1),
    effects: r.effects.join(','),
    'rss MiB': Math.round(r.rssMiB),
  })),
);
writeFileSync(
  new URL('../results/sqs.json', import.meta.url),
  `${JSON.stringify(
    {
      at: new Date().toISOString(),
      n: N,
      groups: GROUPS,
      reps: REPS,
      receivers: RECEIVERS,
      maxInFlight: MAX_IN_FLIGHT,
      concurrency: CONCURRENCY,
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
      results: rows,
    },
    null,
    2,
  )}\n`,
);
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await raw.end();
sqs.destroy();
