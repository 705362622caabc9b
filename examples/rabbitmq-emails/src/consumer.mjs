// @ts-check
// The email consumer as a long-running process (what `npm run demo` starts, kills and restarts).
// Configured by env: DATABASE_URL, AMQP_URL, EMAILS_SCHEMA, EMAILS_QUEUE, MAIL_API_URL and
// optionally EMAILS_CONCURRENCY. Prints one JSON line of its outcome counts every 50 ms and on
// exit; stops gracefully on SIGTERM (finishes and acks what it holds).
import pg from 'pg';
import { runReporting } from '../../../scripts/demo/consumer-main.mjs';
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

await runReporting(consumer, () => pool.end());
