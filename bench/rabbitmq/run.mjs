// RabbitMQ benchmark: @once/rabbitmq against plain amqplib doing the same work, same prefetch.
//   R0  raw consume + ack, no database: the ceiling.
//   B1/msg    plain amqplib, one transaction per message (INSERT effect; COMMIT; ack).
//   B1/batch  plain amqplib, one transaction for the deliveries waiting in the window, one multiple ack
//             (BENCH_BATCH_CONCURRENCY batches at a time, default 1).
//   once/msg  createRabbitConsumer, per-message transactions.
//   once/batch createRabbitConsumer({ batch: true }).
//   floor/msg, floor/batch  the floor (bench/support/floor.mjs, a frozen hand-written inbox) in
//             B1's consumers: same prefetch and concurrency, its claim before the effect, ack after COMMIT.
// Every variant consumes BENCH_MESSAGES persistent messages pre-published to its own quorum queue.
// Size: BENCH_MESSAGES (default 10000; the full size is 100000), BENCH_REPS interleaved runs
// (default 7; per variant the median, ratios the median of per-repetition paired ratios with
// min–max), BENCH_ONLY=name,name to run a subset, BENCH_SCHEMA (default once_bench_rabbitmq).
// Streams (bench/support/faults.mjs; BENCH_STREAMS=clean,faults, default both): clean, and faults,
// where 5 % of the messages are published twice and 5 % throw after their effect on the first
// attempt. once redelivers through its retry queue; B1 and the floor nack with requeue. Every
// run checks its effects: each id once (B1, without an inbox: each published copy once).
import { migrate } from '@once/core';
import { createRabbitConsumer } from '@once/rabbitmq';
import amqp from 'amqplib';
import pg from 'pg';
import { countingPool } from '../support/counting-pool.mjs';
import { bareTransaction, checkEffects, faultRun, streamsFromEnv } from '../support/faults.mjs';
import { createFloorTable, floorBatch, floorOne } from '../support/floor.mjs';
import { timeConsumer } from '../support/measure.mjs';
import { ADAPTER_CHECKS, closeBench } from '../support/report.mjs';

const N = Number(process.env.BENCH_MESSAGES ?? 10_000);
const PREFETCH = Number(process.env.BENCH_PREFETCH ?? 200);
const MSG_CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
// Batches run at a time in every batched variant (once/batch: the adapter's `concurrency` with
// `batch: true`). 1 keeps the queue's order; per message runs BENCH_CONCURRENCY at a time.
const BATCH_CONCURRENCY = Number(process.env.BENCH_BATCH_CONCURRENCY ?? 1);
const REPS = Number(process.env.BENCH_REPS ?? 7);
const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = process.env.BENCH_SCHEMA ?? 'once_bench_rabbitmq';
const STREAMS = streamsFromEnv();
const RUN = `bench-rmq-${process.pid}`;

const raw = new pg.Pool({ connectionString: DB_URL, max: 20 });
raw.on('error', () => {});
const { pool, counter } = countingPool(raw);

await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(raw, { schema: SCHEMA });
await raw.query(
  `CREATE TABLE ${SCHEMA}.effects (variant text NOT NULL, id text NOT NULL, amount int NOT NULL)`,
);
await createFloorTable(raw, SCHEMA);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (variant, id, amount) VALUES ($1, $2, $3)`;

const conn = await amqp.connect(AMQP_URL, { clientProperties: { connection_name: RUN } });
conn.on('error', () => {});
const admin = await conn.createConfirmChannel();
admin.on('error', () => {});

/** The current run's stream (which ids fail once), its repetition and the redeliveries seen so far. */
let run;
let rep = 0;
let redelivered = 0;
/** The effect every variant writes, then the stream's transient failure (so it rolls back). */
async function effect(q, queue, id, amount) {
  await q.query(EFFECT, [queue, id, amount]);
  run.fail(id);
}

async function fill(queue) {
  await admin.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await admin.purgeQueue(queue);
  for (const [n, i] of run.order.entries()) {
    const body = Buffer.from(JSON.stringify({ id: `m-${i}`, amount: i % 100 }));
    if (
      !admin.sendToQueue(queue, body, {
        persistent: true,
        messageId: `m-${i}`,
        contentType: 'application/json',
      })
    ) {
      await new Promise((r) => admin.once('drain', r));
    }
    if (n % 5000 === 4999) await admin.waitForConfirms();
  }
  await admin.waitForConfirms();
}

/**
 * Times `consume` on `stream` until it reports every published message done (settled after its
 * COMMIT; a failed attempt is not done), checks the effects; returns the measurements.
 */
async function measure(name, queue, consume, stream) {
  run = faultRun(stream, N, (k) => `m-${k}`);
  redelivered = 0;
  await fill(queue);
  const label = `${name} (${stream.mode} stream, repetition ${rep + 1} of ${REPS})`;
  const r = await timeConsumer({ name, n: run.published, counter, consume, label });
  await admin.deleteQueue(queue).catch(() => {});
  if (name !== 'R0 raw') {
    const { rows } = await raw.query(
      `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${SCHEMA}.effects WHERE variant = $1`,
      [queue],
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
  return { ...r, redelivered };
}

/** A transient failure: nack with requeue, the plain consumers' redelivery. Anything else is a bug. */
function requeue(ch, ms, err) {
  if (!String(err?.message).startsWith('bench:')) throw err;
  for (const m of ms) ch.nack(m, false, true);
  redelivered += ms.length;
}

/** B1/msg's consumer: up to MSG_CONCURRENCY deliveries at once, `work(m)` each, ack after it. */
async function perMessage(queue, onDone, work) {
  const ch = await plainChannel(PREFETCH);
  const buffer = [];
  let active = 0;
  const pump = () => {
    while (active < MSG_CONCURRENCY && buffer.length > 0) {
      const m = buffer.shift();
      active++;
      work(m)
        .then(() => {
          // Out-of-order completion: a plain ack of one tag (no multiple) is safe.
          ch.ack(m);
          onDone();
        })
        .catch((err) => requeue(ch, [m], err))
        .finally(() => {
          active--;
          pump();
        });
    }
  };
  await ch.consume(queue, (m) => {
    buffer.push(m);
    pump();
  });
  return () => ch.close();
}

/**
 * B1/batch's consumer: `work(take)` for up to BATCH waiting deliveries, BATCH_CONCURRENCY batches
 * at a time. One batch at a time acks with one multiple ack; concurrent batches finish out of
 * order, so each acks its own deliveries (a multiple ack could cover another batch's).
 */
async function batched(queue, onDone, work) {
  const ch = await plainChannel(PREFETCH);
  const buffer = [];
  let running = 0;
  const pump = async () => {
    if (running >= BATCH_CONCURRENCY || buffer.length === 0) return;
    running++;
    const take = buffer.splice(0, BATCH);
    void pump();
    try {
      await work(take);
      if (BATCH_CONCURRENCY === 1) ch.ack(take[take.length - 1], true);
      else for (const m of take) ch.ack(m);
      for (const _ of take) onDone();
    } catch (err) {
      requeue(ch, take, err);
    }
    running--;
    setImmediate(pump);
  };
  await ch.consume(queue, (m) => {
    buffer.push(m);
    void pump();
  });
  return () => ch.close();
}

async function plainChannel(prefetch) {
  const ch = await conn.createChannel();
  ch.on('error', () => {});
  await ch.prefetch(prefetch);
  return ch;
}

const variants = {
  R0: (queue, stream) =>
    measure(
      'R0 raw',
      queue,
      async (onDone) => {
        const ch = await plainChannel(PREFETCH);
        await ch.consume(queue, (m) => {
          ch.ack(m);
          onDone();
        });
        return () => ch.close();
      },
      stream,
    ),
  'B1/msg': (queue, stream) =>
    measure(
      'B1/msg',
      queue,
      (onDone) =>
        perMessage(queue, onDone, (m) => {
          const body = JSON.parse(m.content.toString());
          return bareTransaction(pool, (c) => effect(c, queue, m.properties.messageId, body.amount));
        }),
      stream,
    ),
  'B1/batch': (queue, stream) =>
    measure(
      'B1/batch',
      queue,
      (onDone) =>
        batched(queue, onDone, (take) =>
          bareTransaction(pool, async (c) => {
            for (const m of take) {
              const body = JSON.parse(m.content.toString());
              await effect(c, queue, m.properties.messageId, body.amount);
            }
          }),
        ),
      stream,
    ),
  'floor/msg': (queue, stream) =>
    measure(
      'floor/msg',
      queue,
      (onDone) =>
        perMessage(queue, onDone, (m) =>
          floorOne(pool, SCHEMA, queue, m.properties.messageId, (q) =>
            effect(q, queue, m.properties.messageId, JSON.parse(m.content.toString()).amount),
          ),
        ),
      stream,
    ),
  'floor/batch': (queue, stream) =>
    measure(
      'floor/batch',
      queue,
      (onDone) =>
        batched(queue, onDone, (take) =>
          floorBatch(
            pool,
            SCHEMA,
            queue,
            take,
            (m) => m.properties.messageId,
            (q, m) => effect(q, queue, m.properties.messageId, JSON.parse(m.content.toString()).amount),
          ),
        ),
      stream,
    ),
  'once/msg': (queue, stream) => onceVariant('once/msg', queue, false, stream),
  'once/batch': (queue, stream) => onceVariant('once/batch', queue, true, stream),
};

function onceVariant(name, queue, batch, stream) {
  return measure(
    name,
    queue,
    async (onDone) => {
      const consumer = createRabbitConsumer({
        url: AMQP_URL,
        queue,
        pool,
        schema: SCHEMA,
        consumer: queue,
        prefetch: PREFETCH,
        concurrency: batch ? BATCH_CONCURRENCY : MSG_CONCURRENCY,
        batch,
        batchSize: BATCH,
        socketOptions: { clientProperties: { connection_name: RUN } },
        handler: async (e, { tx }) => {
          const body = JSON.parse(e.body.toString());
          await effect(tx, queue, e.id, body.amount);
        },
      });
      // Done once settled after COMMIT (processed, or a duplicate skipped); anything else comes back.
      consumer.on('settled', (e) => {
        if (e.status === 'processed' || e.status === 'duplicate') onDone();
        else redelivered++;
      });
      await consumer.start();
      return async () => {
        await consumer.stop();
        for (const s of ['.quarantine', '.dead', '.retry.1000ms', '.retry.10000ms', '.retry.60000ms']) {
          await admin.deleteQueue(queue + s).catch(() => {});
        }
        await admin.deleteExchange(`${queue}.dlx`).catch(() => {});
      };
    },
    stream,
  );
}

console.log(
  `RabbitMQ bench: ${N} persistent messages per variant, prefetch ${PREFETCH}, per-message concurrency ${MSG_CONCURRENCY}, batch ${BATCH}, ${REPS} interleaved repetitions`,
);
const only = process.env.BENCH_ONLY?.split(',');
const names = Object.keys(variants).filter((n) => !only || only.includes(n));
const streams = [];
for (const stream of STREAMS) {
  const runs = Object.fromEntries(names.map((n) => [n, []]));
  console.log(`\n${stream.mode} stream`);
  // Repetitions interleave the variants in a rotating order, so a noisy neighbour slows all alike.
  for (rep = 0; rep < REPS; rep++) {
    const order = names.slice(rep % names.length).concat(names.slice(0, rep % names.length));
    for (const name of order)
      runs[name].push(await variants[name](`${RUN}-${stream.mode}-${name.replace('/', '-')}-${rep}`, stream));
  }
  streams.push({ ...stream, runs });
}
closeBench({
  streams,
  reps: REPS,
  checks: ADAPTER_CHECKS,
  file: new URL('../results/rabbitmq.json', import.meta.url),
  meta: {
    messages: N,
    reps: REPS,
    prefetch: PREFETCH,
    concurrency: MSG_CONCURRENCY,
    batch: BATCH,
    batchConcurrency: BATCH_CONCURRENCY,
  },
});
const dupes = await raw.query(
  `SELECT variant, count(*)::int AS n FROM (SELECT variant, id FROM ${SCHEMA}.effects GROUP BY 1, 2 HAVING count(*) > 1) d WHERE variant NOT LIKE '%-faults-B1-%' GROUP BY 1`,
);
if (dupes.rows.length > 0) console.log('  duplicate effects:', dupes.rows);

await conn.close();
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await raw.end();
