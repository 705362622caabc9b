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
// min–max), BENCH_ONLY=name,name to run a subset.
import { migrate } from '@once/core';
import { createRabbitConsumer } from '@once/rabbitmq';
import amqp from 'amqplib';
import pg from 'pg';
import { countingPool } from '../support/counting-pool.mjs';
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
const SCHEMA = 'once_bench_rabbitmq';
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

async function fill(queue) {
  await admin.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await admin.purgeQueue(queue);
  for (let i = 0; i < N; i++) {
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
    if (i % 5000 === 4999) await admin.waitForConfirms();
  }
  await admin.waitForConfirms();
}

/** Times `consume` until it reports N messages done; returns the measurements. */
async function measure(name, queue, consume) {
  await fill(queue);
  const r = await timeConsumer({ name, n: N, counter, consume });
  await admin.deleteQueue(queue).catch(() => {});
  return r;
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
    await work(take);
    if (BATCH_CONCURRENCY === 1) ch.ack(take[take.length - 1], true);
    else for (const m of take) ch.ack(m);
    for (const _ of take) onDone();
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
  R0: (queue) =>
    measure('R0 raw', queue, async (onDone) => {
      const ch = await plainChannel(PREFETCH);
      await ch.consume(queue, (m) => {
        ch.ack(m);
        onDone();
      });
      return () => ch.close();
    }),
  'B1/msg': (queue) =>
    measure('B1/msg', queue, (onDone) =>
      perMessage(queue, onDone, async (m) => {
        const c = await pool.connect();
        try {
          const body = JSON.parse(m.content.toString());
          await c.query('BEGIN');
          await c.query(EFFECT, [queue, m.properties.messageId, body.amount]);
          await c.query('COMMIT');
        } finally {
          c.release();
        }
      }),
    ),
  'B1/batch': (queue) =>
    measure('B1/batch', queue, (onDone) =>
      batched(queue, onDone, async (take) => {
        const c = await pool.connect();
        try {
          await c.query('BEGIN');
          for (const m of take) {
            const body = JSON.parse(m.content.toString());
            await c.query(EFFECT, [queue, m.properties.messageId, body.amount]);
          }
          await c.query('COMMIT');
        } finally {
          c.release();
        }
      }),
    ),
  'floor/msg': (queue) =>
    measure('floor/msg', queue, (onDone) =>
      perMessage(queue, onDone, (m) =>
        floorOne(pool, SCHEMA, queue, m.properties.messageId, (q) =>
          q.query(EFFECT, [queue, m.properties.messageId, JSON.parse(m.content.toString()).amount]),
        ),
      ),
    ),
  'floor/batch': (queue) =>
    measure('floor/batch', queue, (onDone) =>
      batched(queue, onDone, (take) =>
        floorBatch(
          pool,
          SCHEMA,
          queue,
          take,
          (m) => m.properties.messageId,
          (q, m) => q.query(EFFECT, [queue, m.properties.messageId, JSON.parse(m.content.toString()).amount]),
        ),
      ),
    ),
  'once/msg': (queue) => onceVariant('once/msg', queue, false),
  'once/batch': (queue) => onceVariant('once/batch', queue, true),
};

function onceVariant(name, queue, batch) {
  return measure(name, queue, async (onDone) => {
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
        await tx.query(EFFECT, [queue, e.id, body.amount]);
      },
    });
    consumer.on('settled', () => onDone());
    await consumer.start();
    return async () => {
      await consumer.stop();
      for (const s of ['.quarantine', '.dead', '.retry.1000ms', '.retry.10000ms', '.retry.60000ms']) {
        await admin.deleteQueue(queue + s).catch(() => {});
      }
      await admin.deleteExchange(`${queue}.dlx`).catch(() => {});
    };
  });
}

console.log(
  `RabbitMQ bench: ${N} persistent messages per variant, prefetch ${PREFETCH}, per-message concurrency ${MSG_CONCURRENCY}, batch ${BATCH}, ${REPS} interleaved repetitions`,
);
const only = process.env.BENCH_ONLY?.split(',');
const names = Object.keys(variants).filter((n) => !only || only.includes(n));
const runs = Object.fromEntries(names.map((n) => [n, []]));
// Repetitions interleave the variants in a rotating order, so a noisy neighbour slows all alike.
for (let rep = 0; rep < REPS; rep++) {
  const order = names.slice(rep % names.length).concat(names.slice(0, rep % names.length));
  for (const name of order) runs[name].push(await variants[name](`${RUN}-${name.replace('/', '-')}-${rep}`));
}
closeBench({
  runs,
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
  `SELECT variant, count(*)::int AS n FROM (SELECT variant, id FROM ${SCHEMA}.effects GROUP BY 1, 2 HAVING count(*) > 1) d GROUP BY 1`,
);
if (dupes.rows.length > 0) console.log('  duplicate effects:', dupes.rows);

await conn.close();
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await raw.end();
