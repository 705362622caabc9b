// @ts-check
// The payments consumer as a long-running process. Configured by environment:
//   PAYMENTS_SCHEMA, PAYMENTS_QUEUE_URL, PAYMENTS_DLQ_URL (required), PAYMENTS_CONSUMER,
//   PAYMENTS_VISIBILITY_S (default 30), DATABASE_URL, SQS_ENDPOINT.
// Prints one JSON line of its outcome counts every 50 ms and on exit; SIGTERM stops it gracefully
// (what it holds is finished and settled first).
import pg from 'pg';
import { runReporting } from '../../../scripts/demo/consumer-main.mjs';
import { createPaymentsConsumer } from './payments-consumer.mjs';
import { DATABASE_URL, sqsClient } from './sqs.mjs';

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required (see the top of src/consumer.mjs)`);
  return value;
}

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
pool.on('error', (err) => console.error('pool error:', err.message));
const client = sqsClient();
const consumer = createPaymentsConsumer({
  client,
  pool,
  schema: required('PAYMENTS_SCHEMA'),
  queueUrl: required('PAYMENTS_QUEUE_URL'),
  deadLetterUrl: required('PAYMENTS_DLQ_URL'),
  consumer: process.env.PAYMENTS_CONSUMER ?? 'example.payments',
  visibilityTimeoutS: Number(process.env.PAYMENTS_VISIBILITY_S ?? 30),
});

await runReporting(consumer, async () => {
  await pool.end();
  client.destroy();
});
