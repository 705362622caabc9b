// @ts-check
// Emails sent once from RabbitMQ in lease mode. Run against the local services:
//   npm run services start && npm run build && npm start -w @once/example-rabbitmq-emails
// It starts the fake mail API, publishes email requests (some sent twice with the same message
// id), and consumes them: each email is a durable step that passes its idempotency key to the API.
// The API cuts off the first answer for about one key in eight after delivering, as a timeout
// would; the consumer retries, the API answers from the key, and no one gets a second email.
import { quoteIdentifier } from '@once/core/admin';
import amqp from 'amqplib';
import pg from 'pg';
import { createEmailConsumer, queuesOf } from './email-consumer.mjs';
import { startMailApi } from './mail-api.mjs';
import { publishEmails } from './producer.mjs';
import { setupSchema } from './schema.mjs';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const SCHEMA = 'example_rabbitmq_emails';
const s = quoteIdentifier(SCHEMA, 'schema');

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
pool.on('error', (err) => console.error('pool error', err.message));
// A fresh schema each run; it is kept afterwards, to look at.
await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
await setupSchema(pool, SCHEMA);
const api = await startMailApi({ pool, schema: SCHEMA, loseResponseShare: 0.125 });

const run = Date.now().toString(36);
const queue = `example-emails-${run}`;
const { sent, unique } = await publishEmails({ amqpUrl: AMQP_URL, queue, run, count: 24, dupShare: 0.3 });
console.log(`published ${sent} email requests, ${unique} unique`);

const consumer = createEmailConsumer({ pool, schema: SCHEMA, amqpUrl: AMQP_URL, queue, mailApiUrl: api.url });
let settled = 0;
consumer.inbox.on('message:processed', () => settled++);
consumer.inbox.on('message:duplicate', (e) => {
  settled++;
  console.log(`duplicate ${e.id}: no second email`);
});
consumer.inbox.on('message:retry', (e) => console.log(`retry ${e.id}: ${e.error.message}`));
await consumer.start();
const until = Date.now() + 30_000;
while (settled < sent && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
await consumer.stop();

const { rows } = await pool.query(
  `SELECT e.reference AS message, e.recipient, e.id AS provider_id,
          (SELECT count(*)::int FROM ${s}.mail_api_calls c WHERE c.idempotency_key = e.idempotency_key) AS api_calls
   FROM ${s}.mail_api_emails e ORDER BY e.id`,
);
console.table(rows);
const delivered = new Map();
for (const r of rows) delivered.set(r.message, (delivered.get(r.message) ?? 0) + 1);
const once = delivered.size === unique && [...delivered.values()].every((n) => n === 1);
console.log(
  `${rows.length} emails delivered for ${unique} unique requests by ${api.stats.calls} API calls ` +
    `(${api.stats.replayed} answered from the idempotency key): each email sent once: ${once ? 'yes' : 'NO'}`,
);

const connection = await amqp.connect(AMQP_URL);
const ch = await connection.createChannel();
for (const q of [...queuesOf(queue), `${queue}.dead`]) await ch.deleteQueue(q);
await ch.deleteExchange(`${queue}.dlx`);
await connection.close();
await api.close();
await pool.end();
process.exitCode = once ? 0 : 1;
