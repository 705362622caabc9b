// Reproduction: batches that deadlock on the handler's own rows crawl.
//
// A handler updates one account row per message; the messages of one account are spread over
// concurrent receives. With `batch: true` each receive is one transaction, so two batches lock
// the same accounts in different orders and PostgreSQL finds each deadlock (40P01) only after
// deadlock_timeout (1 s by default); the victim's batch is retried. Per message (one transaction
// each) nothing is held across accounts. On a FIFO queue with the account as MessageGroupId, one
// group never spans two concurrent batches (the consumer serialises batches by their groups), so
// batches do not deadlock there.
//
// Prints messages/s, retries and deadlocks per variant; asserts nothing about time. Checks that
// every message's effect landed once (the balances add up). Bounded: BENCH_HOT_N messages
// (default 600) over BENCH_HOT_ACCOUNTS accounts (default 10), each variant stopped after
// BENCH_HOT_LIMIT_S seconds (default 120). Run after `npm run build`:
//   node packages/sqs/bench/hot-accounts.mjs
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import pg from 'pg';
import { migrate } from '../../core/dist/index.js';
import { createSqsConsumer } from '../dist/index.js';

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

async function run({ fifo, batch }) {
  const url = await filledQueue(fifo);
  await pool.query(`TRUNCATE ${SCHEMA}.accounts`);
  await pool.query(`INSERT INTO ${SCHEMA}.accounts (id) SELECT generate_series(0, $1 - 1)`, [ACCOUNTS]);
  const consumer = createSqsConsumer({
    client: sqs,
    queueUrl: url,
    pool,
    schema: SCHEMA,
    consumer: `hot-${url}`,
    batch,
    deadLetter: 'discard',
    receivers: RECEIVERS,
    maxInFlight: RECEIVERS * 10,
    concurrency: CONCURRENCY,
    waitTimeSeconds: 1,
    // Redeliver a retried message at once: the cost measured is the deadlocks', not a backoff's.
    retryDelayMs: () => 0,
    handler: async (e, { tx }) => {
      const { account, amount } = JSON.parse(e.body.toString());
      await tx.query(`UPDATE ${SCHEMA}.accounts SET balance = balance + $2 WHERE id = $1`, [account, amount]);
    },
  });
  let done = 0;
  let retries = 0;
  let deadlocks = 0;
  consumer.inbox.on('message:processed', () => done++);
  consumer.inbox.on('message:retry', (ev) => {
    retries++;
    if (ev.error.code === '40P01' || /deadlock/i.test(ev.error.message)) deadlocks++;
  });
  const t0 = performance.now();
  await consumer.start();
  while (done < N && performance.now() - t0 < LIMIT_MS) await sleep(20);
  const ms = performance.now() - t0;
  await consumer.stop();
  await sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
  const total = Number((await pool.query(`SELECT sum(balance) AS s FROM ${SCHEMA}.accounts`)).rows[0].s);
  return {
    variant: `${fifo ? 'FIFO, group = account' : 'standard'}, ${batch ? 'batch' : 'per message'}`,
    processed: done,
    seconds: Number((ms / 1000).toFixed(1)),
    msgsPerSec: Number(((done / ms) * 1000).toFixed(1)),
    retries,
    deadlocks,
    effectsOk: total === done * AMOUNT,
    finished: done >= N,
  };
}

const rows = [];
try {
  for (const v of [
    { fifo: false, batch: false },
    { fifo: false, batch: true },
    { fifo: true, batch: false },
    { fifo: true, batch: true },
  ]) {
    rows.push(await run(v));
    console.log(JSON.stringify(rows[rows.length - 1]));
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
