// @ts-check
// Payments credited effectively once from an SQS FIFO queue. Run against the local services:
//   npm run services start && npm run build && npm start -w @once/example-sqs-payments
// It publishes payments (with duplicates SQS does not catch: the same payment re-sent under a new
// deduplication id, and one malformed message), consumes them, and prints each account's balance:
// every payment is credited once, and the malformed one lands in the dead-letter queue.
import { CreateQueueCommand, DeleteQueueCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { migrate } from '@once/core';
import { createSqsConsumer, createSqsPublisher, jsonHandler } from '@once/sqs';
import pg from 'pg';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SQS_ENDPOINT = process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324';
const SCHEMA = 'example_sqs_payments';

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
pool.on('error', (err) => console.error('pool error', err.message));
const client = new SQSClient({
  endpoint: SQS_ENDPOINT,
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});

/** @param {string} name */
async function queue(name) {
  const res = await client.send(
    new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: 'true' } }),
  );
  return /** @type {string} */ (res.QueueUrl);
}

await migrate(pool, { schema: SCHEMA });
await pool.query(
  `CREATE TABLE IF NOT EXISTS ${SCHEMA}.balances (account text PRIMARY KEY, cents bigint NOT NULL)`,
);
await pool.query(`TRUNCATE ${SCHEMA}.balances`);
await pool.query(`DELETE FROM ${SCHEMA}.inbox WHERE consumer = 'example.payments'`);
const run = Date.now().toString(36);
const payments = await queue(`example-payments-${run}.fifo`);
const deadLetters = await queue(`example-payments-${run}-dlq.fifo`);

/**
 * The body the handler accepts; anything else is a PermanentError (dead-lettered at once).
 * @param {unknown} v
 * @returns {{ paymentId: string, account: string, cents: number }}
 */
function payment(v) {
  const p = /** @type {Record<string, unknown>} */ (v);
  if (typeof p?.account !== 'string' || !Number.isInteger(p.cents))
    throw new Error('account and integer cents required');
  return /** @type {{ paymentId: string, account: string, cents: number }} */ (p);
}

const consumer = createSqsConsumer({
  client,
  queueUrl: payments,
  pool,
  schema: SCHEMA,
  consumer: 'example.payments',
  deadLetter: { queueUrl: deadLetters },
  waitTimeSeconds: 1,
  // The credit and the payment's claim commit together: a redelivery finds the claim.
  handler: jsonHandler(async (p, _envelope, { tx }) => {
    await tx.query(
      `INSERT INTO ${SCHEMA}.balances (account, cents) VALUES ($1, $2)
       ON CONFLICT (account) DO UPDATE SET cents = balances.cents + EXCLUDED.cents`,
      [p.account, p.cents],
    );
  }, payment),
});
let settled = 0;
consumer.inbox.on('message:processed', () => settled++);
consumer.inbox.on('message:duplicate', (e) => {
  settled++;
  console.log(`duplicate ${e.id}: not credited again`);
});
consumer.on('dead-letter', (e) => {
  settled++;
  console.log(`dead-lettered ${e.id ?? e.messageId}: ${e.reason}`);
});
await consumer.start();

// The publisher sets the message-id attribute (and the FIFO dedup id) to the payment id.
const publisher = createSqsPublisher({ client });
const rows = [
  {
    id: 'pay-1',
    destination: payments,
    key: 'alice',
    body: JSON.stringify({ account: 'alice', cents: 1500 }),
  },
  { id: 'pay-2', destination: payments, key: 'bob', body: JSON.stringify({ account: 'bob', cents: 700 }) },
  {
    id: 'pay-3',
    destination: payments,
    key: 'alice',
    body: JSON.stringify({ account: 'alice', cents: 250 }),
  },
  { id: 'pay-4', destination: payments, key: 'bob', body: '{"account": "bob", "cents": ' },
];
for (const r of await publisher.publish(rows))
  if (!r.ok) console.error('publish failed', r.id, r.error.message);
// A producer retry that SQS cannot catch: the same payment, published again under a new
// deduplication id (as after a relay restart past SQS's five-minute window).
await client.send(
  new SendMessageCommand({
    QueueUrl: payments,
    MessageBody: rows[0]?.body ?? '',
    MessageGroupId: 'alice',
    MessageDeduplicationId: 'pay-1-retry',
    MessageAttributes: { 'message-id': { DataType: 'String', StringValue: 'pay-1' } },
  }),
);

const until = Date.now() + 30_000;
while (settled < rows.length + 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
await consumer.stop();
const { rows: balances } = await pool.query(`SELECT account, cents FROM ${SCHEMA}.balances ORDER BY account`);
console.table(balances);
for (const url of [payments, deadLetters]) await client.send(new DeleteQueueCommand({ QueueUrl: url }));
await pool.end();
client.destroy();
