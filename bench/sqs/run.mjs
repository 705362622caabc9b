// SQS benchmark: once's poller against the no-dedup baseline B1 over the same ElasticMQ FIFO
// queue shape, run side by side in one process (interleaved, each on its own pre-filled queue).
// B1 receives with the same receivers, keeps group order the same way (groups of a receive in
// parallel, one group's messages one after another), writes the same effect and deletes each
// receive's messages in one DeleteMessageBatch: per message (one transaction each) and batched
// (one transaction per receive). ElasticMQ is the ceiling here, so once's own cost is also shown
// as Node CPU and Postgres round trips per message. The floor (bench/support/floor.mjs, a frozen
// hand-written inbox) runs in B1's receive loops, its claim before the effect, deleting after COMMIT.
// Size: BENCH_SQS_N messages over BENCH_SQS_GROUPS groups (default 4000 over 50; the full
// size is 20000: BENCH_SQS_N=20000), BENCH_SQS_REPS interleaved repetitions (default 7; per variant
// the median, ratios the median of per-repetition paired ratios with min–max). Run after `npm run build`.
// BENCH_SCHEMA (default once_bench_sqs). Streams (bench/support/faults.mjs; BENCH_STREAMS=clean,faults,
// default both): clean, and faults, where 5 % of the messages are sent twice (same id, another
// deduplication id) and 5 % throw after their effect on the first attempt. once redelivers through
// its retry (the message's visibility set to its delay); B1 and the floor leave a failed message
// (and the rest of its group in that receive, for order) undeleted until its visibility timeout,
// FAULTS_VISIBILITY_S on the faults stream, expires. Every run checks its effects: each id once
// (B1, without an inbox: each copy once).
// A run with no message done for BENCH_STALL_MS (default 60 s) fails the bench, naming the
// variant, the stream, the repetition and the messages done.
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
import { migrate } from '@once/core';
import { createSqsConsumer } from '@once/sqs';
import pg from 'pg';
import { countingPool } from '../support/counting-pool.mjs';
import { bareTransaction, checkEffects, faultRun, streamsFromEnv } from '../support/faults.mjs';
import { createFloorTable, floorBatch, floorOne } from '../support/floor.mjs';
import { doneCount } from '../support/measure.mjs';
import { fmtRatio, gitCommit, pairedRatio } from '../support/report.mjs';

const N = Number(process.env.BENCH_SQS_N ?? 4000);
const GROUPS = Number(process.env.BENCH_SQS_GROUPS ?? 50);
const REPS = Number(process.env.BENCH_SQS_REPS ?? 7);
// B1 loops receive, process and delete in turn, so it needs several. once keeps receiving while it
// processes; it runs with its default of one receiver and with as many as B1.
const RECEIVERS = Number(process.env.BENCH_SQS_RECEIVERS ?? 4);
const MAX_IN_FLIGHT = Number(process.env.BENCH_SQS_MAX_IN_FLIGHT ?? RECEIVERS * 10);
/** Comma-separated substrings; only variants whose name contains one run (B1 and floor always run). */
const ONLY = process.env.BENCH_SQS_ONLY?.split(',');
const CONCURRENCY = 10;
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ENDPOINT = process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324';
const SCHEMA = process.env.BENCH_SCHEMA ?? 'once_bench_sqs';
const STREAMS = streamsFromEnv();
/** The faults stream's visibility timeout, in s: short, so a message left undeleted comes back soon. */
const FAULTS_VISIBILITY_S = 3;

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
await createFloorTable(raw, SCHEMA);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (id, grp, n) VALUES ($1, $2, $3)`;

let queueNo = 0;

/** The current run's stream (which ids fail once) and the redeliveries it has seen so far. */
let run;
let redelivered = 0;
/** The effect every variant writes, then the stream's transient failure (so it rolls back). */
async function effect(q, [id, grp, n]) {
  await q.query(EFFECT, [id, grp, n]);
  run.fail(id);
}
const transient = (err) => String(err?.message).startsWith('bench:');

/** A fresh queue holding `stream`'s messages; sets `run`. */
async function filledQueue(stream) {
  const name = `bench-sqs-${stream.mode}-${process.pid}-${Date.now().toString(36)}-${queueNo++}.fifo`;
  run = faultRun(stream, N, (j) => `${name}-${j}`);
  redelivered = 0;
  const visibility = stream.mode === 'faults' ? FAULTS_VISIBILITY_S : 30;
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({
      QueueName: name,
      Attributes: { FifoQueue: 'true', VisibilityTimeout: String(visibility) },
    }),
  );
  const calls = [];
  for (let i = 0; i < run.order.length; i += 10) {
    const Entries = run.order.slice(i, i + 10).map((j, e) => ({
      Id: String(e),
      MessageBody: JSON.stringify({ n: j, amount: 7 }),
      MessageGroupId: `g${j % GROUPS}`,
      // Per copy: a copy is a second message with the same id, not one SQS drops.
      MessageDeduplicationId: `d${i + e}`,
      MessageAttributes: { 'message-id': { DataType: 'String', StringValue: `${name}-${j}` } },
    }));
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
  (await raw.query(`SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${SCHEMA}.effects`)).rows[0];

/**
 * B1: receive, effect without dedup, delete the receive's messages in one batch call. With
 * `floor`, the same loops with the floor's claim around the effect (its consumer name: `floor`).
 */
async function baseline(url, batched, floor, label) {
  let stop = false;
  const done = doneCount({ total: run.published, label });
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
      // What a failed attempt leaves undeleted, to come back when its visibility expires.
      const kept = new Set();
      if (floor && batched) {
        await floorBatch(
          pool,
          SCHEMA,
          floor,
          msgs,
          (m) => row(m)[0],
          (q, m) => effect(q, row(m)),
        ).catch((err) => {
          if (!transient(err)) throw err;
          for (const m of msgs) kept.add(m);
        });
      } else if (batched) {
        const c = await pool.connect();
        try {
          await c.query('BEGIN');
          for (const m of msgs) await effect(c, row(m));
          await c.query('COMMIT');
        } catch (err) {
          await c.query('ROLLBACK');
          if (!transient(err)) throw err;
          for (const m of msgs) kept.add(m);
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
            for (const [i, m] of list.entries()) {
              try {
                if (floor) {
                  await floorOne(pool, SCHEMA, floor, row(m)[0], (q) => effect(q, row(m)));
                  continue;
                }
                await bareTransaction(pool, (c) => effect(c, row(m)));
              } catch (err) {
                // The group's later messages wait too: they must not overtake the failed one.
                if (!transient(err)) throw err;
                for (const k of list.slice(i)) kept.add(k);
                return;
              }
            }
          }),
        );
      }
      const settled = msgs.filter((m) => !kept.has(m));
      redelivered += kept.size;
      if (settled.length > 0)
        await sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: url,
            Entries: settled.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
          }),
        );
      done.add(settled.length);
    }
  };
  const loops = Array.from({ length: RECEIVERS }, loop);
  try {
    await done.finished;
  } finally {
    stop = true;
    await Promise.all(loops);
  }
}

async function once(url, batch, receivers, label) {
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
      await effect(tx, [id, e.key, JSON.parse(e.body.toString()).n]);
    },
  });
  // Done once committed (processed, or a duplicate skipped); anything else comes back.
  const done = doneCount({ total: run.published, label });
  consumer.inbox.on('message:processed', () => done.add());
  consumer.inbox.on('message:duplicate', () => done.add());
  for (const e of ['message:retry', 'message:not-run', 'message:busy'])
    consumer.inbox.on(e, () => {
      redelivered++;
    });
  await consumer.start();
  try {
    await done.finished;
  } finally {
    await consumer.stop();
  }
}

// Per message, then batched: B1, the floor, once with one receiver and with as many as B1.
const variants = [
  ['msg', false],
  ['batch', true],
].flatMap(([pair, batched]) => [
  { name: `B1 no-dedup/${pair}`, run: (url, label) => baseline(url, batched, undefined, label), pair },
  { name: `floor/${pair}`, run: (url, label) => baseline(url, batched, `floor-${url}`, label), pair },
  { name: `once/${pair}, 1 receiver`, run: (url, label) => once(url, batched, 1, label), pair },
  {
    name: `once/${pair}, ${RECEIVERS} receivers`,
    run: (url, label) => once(url, batched, RECEIVERS, label),
    pair,
  },
]);

const isBase = (v) => v.name.startsWith('B1') || v.name.startsWith('floor');
if (ONLY) {
  for (let i = variants.length - 1; i >= 0; i--) {
    const v = variants[i];
    if (!isBase(v) && !ONLY.some((o) => v.name.includes(o))) variants.splice(i, 1);
  }
  for (let i = variants.length - 1; i >= 0; i--) {
    const v = variants[i];
    if (isBase(v) && !variants.some((o) => o.pair === v.pair && !isBase(o))) variants.splice(i, 1);
  }
}
const byStream = [];
for (const stream of STREAMS) {
  const results = new Map(variants.map((v) => [v.name, []]));
  for (let rep = 0; rep < REPS; rep++) {
    // Interleaved, in a rotating order, so a noisy neighbour slows every variant alike.
    const order = variants.slice(rep % variants.length).concat(variants.slice(0, rep % variants.length));
    for (const v of order) {
      const url = await filledQueue(stream);
      await raw.query(`TRUNCATE ${SCHEMA}.effects`);
      counter.trips = 0;
      sqsCalls = 0;
      receives = 0;
      receiveMs = 0;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await v.run(url, `sqs ${v.name} (${stream.mode} stream, repetition ${rep + 1} of ${REPS})`);
      const ms = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      const effects = await effectsCount();
      checkEffects({
        variant: v.name,
        stream,
        rows: effects.n,
        ids: effects.d,
        run,
        dedup: !v.name.startsWith('B1'),
      });
      results.get(v.name).push({
        msgsPerSec: (N / ms) * 1000,
        cpuUsPerMsg: (cpu.user + cpu.system) / N,
        roundTripsPerMsg: counter.trips / N,
        sqsCallsPerMsg: sqsCalls / N,
        receiveMs: receiveMs / Math.max(1, receives),
        effects: effects.n,
        redelivered,
        rssMiB: process.memoryUsage().rss / 2 ** 20,
      });
      await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
    }
  }
  byStream.push({ stream, results });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rate = (r) => r.msgsPerSec;
const cpu = (r) => r.cpuUsPerMsg;
/** One stream's medians and paired ratios, printed. */
function summarise({ stream, results }) {
  const rows = variants.map((v) => {
    const rs = results.get(v.name);
    return {
      variant: v.name,
      mode: stream.mode,
      duplicates: stream.duplicates,
      failures: stream.failures,
      redeliveredPerRun: median(rs.map((r) => r.redelivered)),
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
  // Ratios: the median of per-repetition paired ratios (min–max beside it).
  for (const r of rows) {
    const base = rows.find((b) => b.pair === r.pair && b.variant.startsWith('B1'));
    const floor = rows.find((b) => b.pair === r.pair && b.variant.startsWith('floor'));
    const own = results.get(r.variant);
    const b1 = pairedRatio(own, results.get(base.variant), rate);
    r.vsB1 = b1.median;
    r.vsB1Range = [b1.min, b1.max];
    r.cpuOverB1UsPerMsg = r.cpuUsPerMsg - base.cpuUsPerMsg;
    r.vsFloor = pairedRatio(own, results.get(floor.variant), rate);
    r.cpuVsFloor = pairedRatio(own, results.get(floor.variant), cpu);
    r.repMsgsPerSec = own.map((x) => Math.round(x.msgsPerSec));
    r.repCpuUsPerMsg = own.map((x) => Math.round(x.cpuUsPerMsg));
  }
  // The hand-written baselines' own batched ÷ per-message ratios (the SQS target is relative to them).
  const batchOverMsg = (a, b) => pairedRatio(results.get(a), results.get(b), rate);
  const scaling = Object.fromEntries(
    [
      ['B1 batch ÷ msg', 'B1 no-dedup/batch', 'B1 no-dedup/msg'],
      ['floor batch ÷ msg', 'floor/batch', 'floor/msg'],
      ['once batch ÷ msg, 1 receiver', 'once/batch, 1 receiver', 'once/msg, 1 receiver'],
      [
        `once batch ÷ msg, ${RECEIVERS} receivers`,
        `once/batch, ${RECEIVERS} receivers`,
        `once/msg, ${RECEIVERS} receivers`,
      ],
    ]
      .filter(([, a, b]) => results.has(a) && results.has(b))
      .map(([l, a, b]) => [l, batchOverMsg(a, b)]),
  );

  console.log(
    `\nSQS (ElasticMQ FIFO), ${stream.mode} stream (${stream.duplicates * 100} % duplicates, ${stream.failures * 100} % transient failures), ${N} messages over ${GROUPS} groups, ${REPS} rep(s), B1 ${RECEIVERS} receive loops; once holds up to ${MAX_IN_FLIGHT}`,
  );
  console.table(
    rows.map((r) => ({
      variant: r.variant,
      'msg/s': Math.round(r.msgsPerSec),
      'x B1': r.vsB1.toFixed(2),
      'x floor [min–max]': fmtRatio(r.vsFloor),
      'cpu x floor': fmtRatio(r.cpuVsFloor),
      'cpu µs/msg': Math.round(r.cpuUsPerMsg),
      'pg round trips/msg': r.roundTripsPerMsg.toFixed(2),
      'sqs calls/msg': r.sqsCallsPerMsg.toFixed(2),
      'receive ms': r.receiveMs.toFixed(1),
      effects: r.effects.join(','),
      redelivered: r.redeliveredPerRun,
      'rss MiB': Math.round(r.rssMiB),
    })),
  );
  console.log(
    `once ÷ floor targets: msgs/s ≥ 0.9, CPU µs/msg ≤ 1.15 (medians of ${REPS} paired repetitions)`,
  );
  for (const [l, r] of Object.entries(scaling)) console.log(`${l.padEnd(32)} ${fmtRatio(r)}`);
  return { rows, scaling };
}
const summaries = byStream.map(summarise);
writeFileSync(
  new URL('../results/sqs.json', import.meta.url),
  `${JSON.stringify(
    {
      at: new Date().toISOString(),
      commit: gitCommit(),
      n: N,
      groups: GROUPS,
      reps: REPS,
      receivers: RECEIVERS,
      maxInFlight: MAX_IN_FLIGHT,
      concurrency: CONCURRENCY,
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version },
      results: summaries.flatMap((x) => x.rows),
      batchOverMessage: Object.fromEntries(byStream.map((x, i) => [x.stream.mode, summaries[i].scaling])),
    },
    null,
    2,
  )}\n`,
);
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await raw.end();
sqs.destroy();
