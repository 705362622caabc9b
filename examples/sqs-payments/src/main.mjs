// @ts-check
// `npm start`: a short standalone run. It publishes 40 payments over 5 accounts (a quarter of them
// re-sent under a new deduplication id, duplicates SQS cannot catch) and one malformed message,
// consumes them in this process, and prints each account's balance next to what it must be:
// every payment debited once, and the malformed one dead-lettered.
//   npm run services start && npm run build && npm start -w @once/example-sqs-payments
import pg from 'pg';
import { createTables } from './payments.mjs';
import { createPaymentsConsumer } from './payments-consumer.mjs';
import { publishPayments } from './producer.mjs';
import { createFifoQueue, DATABASE_URL, deleteQueues, sqsClient } from './sqs.mjs';

const SCHEMA = 'example_sqs_payments';
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
pool.on('error', (err) => console.error('pool error:', err.message));
const client = sqsClient();

// A fresh schema per run, so the balances below are this run's alone.
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await createTables(pool, SCHEMA);
const run = Date.now().toString(36);
const queueUrl = await createFifoQueue(client, `example-payments-${run}.fifo`);
const deadLetterUrl = await createFifoQueue(client, `example-payments-${run}-dlq.fifo`);

const consumer = createPaymentsConsumer({ client, pool, schema: SCHEMA, queueUrl, deadLetterUrl });
const seen = { processed: 0, duplicate: 0, deadLettered: 0 };
consumer.inbox.on('message:processed', () => seen.processed++);
consumer.inbox.on('message:duplicate', () => seen.duplicate++);
consumer.on('message:dead-lettered', (e) => {
  seen.deadLettered++;
  console.log(`dead-lettered ${e.id ?? '(no id)'}: ${e.reason}`);
});
await consumer.start();

const sent = await publishPayments({
  client,
  queueUrl,
  count: 40,
  dupShare: 0.25,
  run,
  accounts: 5,
  malformed: 1,
});
console.log(
  `sent ${sent.sent} messages: ${sent.unique - 1} payments, ${sent.sent - sent.unique} re-sent, 1 malformed`,
);

const until = Date.now() + 30_000;
while (seen.processed + seen.duplicate + seen.deadLettered < sent.sent && Date.now() < until)
  await new Promise((r) => setTimeout(r, 100));
await consumer.stop();

/** @type {Map<string, { payments: number, debits: number }>} */
const expected = new Map();
for (const p of sent.payments) {
  const e = expected.get(p.account) ?? { payments: 0, debits: 0 };
  expected.set(p.account, { payments: e.payments + 1, debits: e.debits + p.cents });
}
const { rows } = await pool.query(
  `SELECT b.account, b.cents::float8 AS balance, count(p.*)::int AS applied, count(DISTINCT p.payment_id)::int AS distinct_ids
   FROM ${SCHEMA}.balances b JOIN ${SCHEMA}.payments p USING (account) GROUP BY b.account, b.cents ORDER BY b.account`,
);
console.table(
  rows.map((r) => {
    const e = expected.get(r.account);
    return {
      account: r.account,
      'balance (cents)': r.balance,
      'must be': -(e?.debits ?? 0),
      'payments applied': r.applied,
      'unique payments': e?.payments ?? 0,
      'each once':
        r.applied === e?.payments && r.distinct_ids === r.applied && r.balance === -(e?.debits ?? 0),
    };
  }),
);
console.log(`outcomes: ${JSON.stringify(seen)}`);
await deleteQueues(client, [queueUrl, deadLetterUrl]);
await pool.end();
client.destroy();
