// @ts-check
// This example's part of `npm run demo` (see scripts/demo/example-contract.d.ts): email requests
// with re-sends go to a RabbitMQ queue; the consumer (lease mode) sends each through the fake mail
// API, which runs here in the runner's process so it outlives the consumer's SIGKILL. The effects
// are the emails the API delivered: one per unique message, however many calls it took.

import { fileURLToPath } from 'node:url';
import { quoteIdentifier } from '@once/core/admin';
import amqp from 'amqplib';
import pg from 'pg';
import { rabbitBacklog } from '../../scripts/demo/rabbit-backlog.mjs';
import { EMAIL_CONSUMER, queuesOf } from './src/email-consumer.mjs';
import { startMailApi } from './src/mail-api.mjs';
import { publishEmails } from './src/producer.mjs';
import { schemaFor, setupSchema } from './src/schema.mjs';

/** Share of keys whose first API response is cut off after delivery (the window keys close). */
const LOSE_RESPONSE_SHARE = 0.01;

/** @type {import('../../scripts/demo/example-contract.js').DemoExample} */
export default {
  name: 'rabbitmq-emails',
  broker: 'rabbitmq',
  async prepare({ databaseUrl, run, count, dupShare }) {
    const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
    const schema = schemaFor('example_emails', run);
    const s = quoteIdentifier(schema, 'schema');
    const queue = `example-emails-${run}`;
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 6 });
    pool.on('error', () => {});
    await setupSchema(pool, schema);
    const api = await startMailApi({ pool, schema, loseResponseShare: LOSE_RESPONSE_SHARE });
    const { sent, unique } = await publishEmails({ amqpUrl, queue, run, count, dupShare });
    const watch = await amqp.connect(amqpUrl);
    watch.on('error', () => {});

    /** @param {string} sql */
    const one = async (sql) => (await pool.query(sql, [EMAIL_CONSUMER])).rows[0];
    return {
      sent,
      unique,
      consumers: [
        {
          script: fileURLToPath(new URL('./src/consumer.mjs', import.meta.url)),
          args: [],
          env: {
            DATABASE_URL: databaseUrl,
            AMQP_URL: amqpUrl,
            EMAILS_SCHEMA: schema,
            EMAILS_QUEUE: queue,
            MAIL_API_URL: api.url,
          },
        },
      ],
      effects: async () => {
        const r = await pool.query(
          `SELECT count(*)::int AS total, count(DISTINCT reference)::int AS unique FROM ${s}.mail_api_emails`,
        );
        return r.rows[0];
      },
      // Deliveries still queued or unacknowledged, and leases a crashed worker left behind.
      pending: async () =>
        (await rabbitBacklog(watch, queuesOf(queue))) +
        (
          await one(
            `SELECT count(*)::int AS n FROM ${s}.inbox WHERE consumer = $1 AND status = 'in_progress'`,
          )
        ).n,
      verify: async () => {
        const mail = await one(
          `SELECT (SELECT count(*)::int FROM ${s}.mail_api_emails) AS delivered,
                  (SELECT count(DISTINCT reference)::int FROM ${s}.mail_api_emails) AS messages,
                  (SELECT count(*)::int FROM ${s}.mail_api_calls) AS calls,
                  (SELECT count(DISTINCT message_id)::int FROM ${s}.email_log) AS logged,
                  (SELECT count(*)::int FROM ${s}.inbox WHERE consumer = $1 AND status = 'done') AS done`,
        );
        const dead = await rabbitBacklog(watch, [`${queue}.dead`]);
        const ok =
          mail.delivered === unique &&
          mail.messages === unique &&
          mail.logged === unique &&
          mail.done === unique &&
          dead === 0;
        const st = api.stats;
        return {
          ok,
          detail:
            `${mail.delivered} emails delivered for ${unique} unique messages (${mail.messages} messages ` +
            `with an email), by ${mail.calls} API calls: ${mail.calls - mail.delivered} repeats answered ` +
            `from their Idempotency-Key (${st.lost} first answers cut off on purpose); ` +
            `${mail.logged} logged, ${mail.done} done, ${dead} dead-lettered`,
        };
      },
      cleanup: async () => {
        const ch = await watch.createChannel();
        for (const q of [...queuesOf(queue), `${queue}.dead`]) await ch.deleteQueue(q);
        await ch.deleteExchange(`${queue}.dlx`);
        await watch.close();
        await api.close();
        await pool.query(`DROP SCHEMA ${s} CASCADE`);
        await pool.end();
      },
    };
  },
};
