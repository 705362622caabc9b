// @ts-check
// The email consumer as a long-running process (what `npm run demo` starts, kills and restarts).
// Configured by env: DATABASE_URL, AMQP_URL, EMAILS_SCHEMA, EMAILS_QUEUE, MAIL_API_URL and
// optionally EMAILS_CONCURRENCY. Prints one JSON line of its outcome counts every 50 ms and on
// exit; stops gracefully on SIGTERM (finishes and acks what it holds).
import pg from 'pg';
import { createEmailConsumer } from './email-consumer.mjs';

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`environment variable ${name} is required`);
  return value;
}

const pool = new pg.Pool({ connectionString: required('DATABASE_URL'), max: 8 });
pool.on('error', (err) => console.error(`pool error: ${err.message}`));
const consumer = createEmailConsumer({
  pool,
  schema: required('EMAILS_SCHEMA'),
  amqpUrl: required('AMQP_URL'),
  queue: required('EMAILS_QUEUE'),
  mailApiUrl: required('MAIL_API_URL'),
  concurrency: Number(process.env.EMAILS_CONCURRENCY ?? 8),
});

/** @type {Record<'processed' | 'duplicate' | 'conflict' | 'failed' | 'retry' | 'busy', number>} */
const counts = { processed: 0, duplicate: 0, conflict: 0, failed: 0, retry: 0, busy: 0 };
for (const status of /** @type {(keyof typeof counts)[]} */ (Object.keys(counts)))
  consumer.inbox.on(`message:${status}`, () => counts[status]++);
const report = () => process.stdout.write(`${JSON.stringify(counts)}\n`);

// Listen before starting: a SIGTERM while the consumer is still connecting (a Kafka group join
// takes seconds) must wait for the start and then stop, not end the process mid-start.
const started = consumer.start();
process.once('SIGTERM', async () => {
  await started.catch(() => {});
  await consumer.stop();
  report();
  await pool.end();
  process.exit(0);
});
await started;
report();
setInterval(report, 50).unref();
