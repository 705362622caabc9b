// Reproduction: batches that deadlock on the handler's own rows crawl.
//
// A handler updates one account row per message; the messages of one account are spread over
// concurrent receives. With `batch: true` each receive is one transaction, so two batches lock
// the same accounts in different orders and PostgreSQL finds each deadlock (40P01) only after
// deadlock_timeout (1 s by default); the victim's batch is replayed one message per transaction.
// Per message (one transaction each) nothing is held across accounts. With `keyOf` naming the
// account, one account never spans two concurrent batches (on a standard queue the consumer
// forms batches in lanes, a key in one lane at a time), so batches do not deadlock; on a FIFO
// queue with the account as MessageGroupId the group is that key already. Each variant reports
// how many batches the consumer handed to processBatch and their mean size.
//
// Prints messages/s, retries and deadlocks (handler statements that met 40P01) per variant, and
// batched ÷ per message on the standard queue; asserts nothing about time. Checks that every
// message's effect landed exactly once: each run appends the message id to an effects table with
// no unique key, so a second effect would be stored and counted, and the balances must add up.
// Bounded: BENCH_HOT_N messages (default 600) over BENCH_HOT_ACCOUNTS accounts (default 10), each
// variant stopped after BENCH_HOT_LIMIT_S seconds (default 120). BENCH_HOT_VARIANTS picks
// variants by number (default all: 1,2,3,4,5); BENCH_HOT_ROUNDS (default 1) runs them that many
// times, interleaved, and reports each variant's median, so that load from other work on the
// machine falls on every variant alike. Run after `npm run build`:
//   node packages/sqs/bench/hot-accounts.mjs
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { migrate } from '@once/core';
import { createSqsConsumer } from '@once/sqs';
import pg from 'pg';

const N = Number(process.env.BENCH_HOT_N ?? 600);
const ACCOUNTS = Number(process.env.BENCH_HOT_ACCOUNTS ?? 10);
const LIMIT_MS = Number(process.env.BENCH_HOT_LIMIT_S ?? 120) * 1000;
const RECEIVERS = Number(process.env.BENCH_HOT_RECEIVERS ?? 4);
const CONCURRENCY = 10;
const AMOUNT = 7;
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const ENDPOINT = process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324';
const SCHEMA = `once_bench_hot_${process.pid}`;

const sqs = new SQSClient({
  endpoint: ENDPOINT,
  region: 'us-east-1',
  credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
});
const pool = new pg.Pool({ connectionString: DB_URL, max: CONCURRENCY + 2 });
pool.on('error', () => {});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

await migrate(pool, { schema: SCHEMA });
await pool.query(`CREATE TABLE ${SCHEMA}.accounts (id int PRIMARY KEY, balance bigint NOT NULL DEFAULT 0)`);
// Append-only: no unique key, so a second effect of one message is stored and counted.
await pool.query(`CREATE TABLE ${SCHEMA}.effects (message_id text NOT NULL)`);
const deadlockTimeout = (await pool.query('SHOW deadlock_timeout')).rows[0].deadlock_timeout;

async function filledQueue(fifo) {
  const name = `bench-hot-${process.pid}-${Date.now().toString(36)}${fifo ? '.fifo' : ''}`;
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({
      QueueName: name,
      Attributes: { VisibilityTimeout: '30', ...(fifo ? { FifoQueue: 'true' } : {}) },
    }),
  );
  for (let i = 0; i < N; i += 10) {
    const Entries = [];
    for (let j = i; j < Math.min(N, i + 10); j++) {
      // Round-robin: every receive of ten holds every account, so concurrent batches overlap.
      const account = j % ACCOUNTS;
      Entries.push({
        Id: String(j - i),
        MessageBody: JSON.stringify({ account, amount: AMOUNT }),
        MessageAttributes: { 'message-id': { DataType: 'String', StringValue: `${name}-${j}` } },
        ...(fifo ? { MessageGroupId: `a${account}`, MessageDeduplicationId: `d${j}` } : {}),
      });
    }
    const res = await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries }));
    if (res.Failed?.length) throw new Error(`send failed: ${JSON.stringify(res.Failed[0])}`);
  }
  return QueueUrl;
}

async function run({ fifo, batch, keyed }) {
  const url = await filledQueue(fifo);
  await pool.query(`TRUNCATE ${SCHEMA}.accounts, ${SCHEMA}.effects`);
  await pool.query(`INSERT INTO ${SCHEMA}.accounts (id) SELECT generate_series(0, $1 - 1)`, [ACCOUNTS]);
  const consumer = createSqsConsumer({
    client: sqs,
    queueUrl: url,
    pool,
    schema: SCHEMA,
    consumer: `hot-${url}`,
    batch,
    ...(keyed ? { keyOf: (e) => String(JSON.parse(e.body.toString()).account) } : {}),
    deadLetterQueueUrl: false,
    receivers: RECEIVERS,
    maxInFlight: RECEIVERS * 10,
    concurrency: CONCURRENCY,
    waitTimeSeconds: 1,
    // Redeliver a retried message at once: the cost measured is the deadlocks', not a backoff's.
    retryDelayMs: () => 0,
    handler: async (e, { tx, id }) => {
      const { account, amount } = JSON.parse(e.body.toString());
      await tx.query(`UPDATE ${SCHEMA}.accounts SET balance = balance + $2 WHERE id = $1`, [account, amount]);
      await tx.query(`INSERT INTO ${SCHEMA}.effects (message_id) VALUES ($1)`, [id]);
    },
  });
  // Transactions' sizes: the consumer hands each batch to processBatch.
  const sizes = [];
  const processBatch = consumer.inbox.processBatch.bind(consumer.inbox);
  consumer.inbox.processBatch = (envelopes) => {
    sizes.push(envelopes.length);
    return processBatch(envelopes);
  };
  let done = 0;
  let retries = 0;
  let deadlocks = 0;
  consumer.inbox.on('message:processed', () => done++);
  consumer.inbox.on('message:retry', () => retries++);
  // Every deadlock has a victim statement in some handler, whether core then replays the batch
  // one message per transaction (no retry outcome) or the message is retried.
  consumer.inbox.on('handler:settled', (ev) => {
    if (ev.error?.code === '40P01') deadlocks++;
  });
  const t0 = performance.now();
  await consumer.start();
  while (done < N && performance.now() - t0 < LIMIT_MS) await sleep(20);
  const ms = performance.now() - t0;
  await consumer.stop();
  await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
  const total = Number((await pool.query(`SELECT sum(balance) AS s FROM ${SCHEMA}.accounts`)).rows[0].s);
  const ledger = (
    await pool.query(
      `SELECT count(*)::int AS effects, count(DISTINCT message_id)::int AS ids FROM ${SCHEMA}.effects`,
    )
  ).rows[0];
  return {
    variant: `${fifo ? 'FIFO, group = account' : 'standard'}, ${batch ? 'batch' : 'per message'}${keyed ? ', keyOf = account' : ''}`,
    processed: done,
    seconds: Number((ms / 1000).toFixed(1)),
    msgsPerSec: Number(((done / ms) * 1000).toFixed(1)),
    retries,
    deadlocks,
    // Exactly once: N effects, one per id, and the balances add up.
    effectsOk: ledger.effects === N && ledger.ids === N && total === N * AMOUNT,
    finished: done >= N,
    batches: sizes.length,
    meanBatch: sizes.length ? Number((sizes.reduce((a, b) => a + b, 0) / sizes.length).toFixed(1)) : 0,
  };
}

const VARIANTS = [
  { fifo: false, batch: false },
  { fifo: false, batch: true },
  { fifo: false, batch: true, keyed: true },
  { fifo: true, batch: false },
  { fifo: true, batch: true },
];
const picked = (process.env.BENCH_HOT_VARIANTS ?? '1,2,3,4,5').split(',').map((n) => VARIANTS[Number(n) - 1]);
const ROUNDS = Number(process.env.BENCH_HOT_ROUNDS ?? 1);
const rows = [];
try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const v of picked) {
      rows.push({ round, ...(await run(v)) });
      console.log(JSON.stringify(rows[rows.length - 1]));
    }
  }
} finally {
  await pool.query(`DROP SCHEMA ${SCHEMA} CASCADE`).catch(() => {});
  await pool.end();
  sqs.destroy();
}
console.log(
  `\n${N} messages over ${ACCOUNTS} accounts, ${RECEIVERS} receivers, concurrency ${CONCURRENCY}, deadlock_timeout ${deadlockTimeout}`,
);
console.table(rows);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const summary = [...new Set(rows.map((r) => r.variant))].map((variant) => {
  const of = rows.filter((r) => r.variant === variant);
  return {
    variant,
    runs: of.length,
    medianMsgsPerSec: Number(median(of.map((r) => r.msgsPerSec)).toFixed(1)),
    deadlocks: of.reduce((n, r) => n + r.deadlocks, 0),
    effectsOk: of.every((r) => r.effectsOk && r.finished),
  };
});
console.log(`\nmedians over ${ROUNDS} round(s)`);
console.table(summary);
const rate = (name) => summary.find((r) => r.variant === name)?.medianMsgsPerSec;
const perMessage = rate('standard, per message');
for (const name of ['standard, batch', 'standard, batch, keyOf = account']) {
  if (!perMessage || !rate(name)) continue;
  // Within each round too: both ran minutes apart at most, under the same load.
  const inRound = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const a = rows.find((r) => r.round === round && r.variant === name);
    const b = rows.find((r) => r.round === round && r.variant === 'standard, per message');
    if (a && b) inRound.push((a.msgsPerSec / b.msgsPerSec).toFixed(2));
  }
  console.log(
    `${name} ÷ per message: ${(rate(name) / perMessage).toFixed(2)} (medians); per round: ${inRound.join(', ')}`,
  );
}
