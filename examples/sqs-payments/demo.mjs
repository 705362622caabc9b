// @ts-check
// The `npm run demo` side of this example (see scripts/demo.mjs): a FIFO queue and a schema of
// its own, payments with re-sends SQS cannot catch, and the check that every account's balance is
// exactly minus the sum of its unique payments.
import { fileURLToPath } from 'node:url';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { createTables } from './src/payments.mjs';
import { publishPayments } from './src/producer.mjs';
import { createFifoQueue, deleteQueues, sqsClient } from './src/sqs.mjs';

/** @type {import('../../scripts/demo/example-contract.js').DemoExample} */
export default {
  name: 'sqs-payments',
  broker: 'sqs',
  async prepare({ databaseUrl, run, count, dupShare }) {
    const schema = `demo_sqs_payments_${run}`;
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    pool.on('error', () => {});
    const client = sqsClient();
    await createTables(pool, schema);
    const queueUrl = await createFifoQueue(client, `demo-payments-${run}.fifo`);
    const deadLetterUrl = await createFifoQueue(client, `demo-payments-${run}-dlq.fifo`);
    const { sent, unique, payments } = await publishPayments({ client, queueUrl, count, dupShare, run });

    /** @type {Map<string, number>} what each account must be debited: its unique payments */
    const expected = new Map();
    for (const p of payments) expected.set(p.account, (expected.get(p.account) ?? 0) + p.cents);

    return {
      sent,
      unique,
      consumers: [
        {
          script: fileURLToPath(new URL('./src/consumer.mjs', import.meta.url)),
          args: [],
          env: {
            DATABASE_URL: databaseUrl,
            PAYMENTS_SCHEMA: schema,
            PAYMENTS_QUEUE_URL: queueUrl,
            PAYMENTS_DLQ_URL: deadLetterUrl,
            PAYMENTS_CONSUMER: 'demo.payments',
            // What the killed consumer held comes back after this, not after the default 30 s.
            PAYMENTS_VISIBILITY_S: '5',
          },
        },
      ],
      async effects() {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS total, count(DISTINCT payment_id)::int AS unique FROM ${schema}.payments`,
        );
        return rows[0];
      },
      async pending() {
        let n = 0;
        for (const url of [queueUrl, deadLetterUrl]) {
          const { Attributes: a = {} } = await client.send(
            new GetQueueAttributesCommand({
              QueueUrl: url,
              AttributeNames: [
                'ApproximateNumberOfMessages',
                'ApproximateNumberOfMessagesNotVisible',
                'ApproximateNumberOfMessagesDelayed',
              ],
            }),
          );
          n +=
            Number(a.ApproximateNumberOfMessages ?? 0) +
            Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
            Number(a.ApproximateNumberOfMessagesDelayed ?? 0);
        }
        return n;
      },
      async verify() {
        const { rows } = await pool.query(`SELECT account, cents::float8 AS cents FROM ${schema}.balances`);
        /** @type {Map<string, number>} */
        const balances = new Map(rows.map((r) => [r.account, Number(r.cents)]));
        const wrong = [...expected].filter(([account, debit]) => balances.get(account) !== -debit);
        const extra = [...balances.keys()].filter((a) => !expected.has(a));
        const debited = [...expected.values()].reduce((s, c) => s + c, 0);
        return wrong.length === 0 && extra.length === 0
          ? {
              ok: true,
              detail: `${expected.size} accounts, each balance = -(sum of its unique payments); ${debited} cents debited once`,
            }
          : {
              ok: false,
              detail: `${wrong.length} balance(s) off (e.g. ${wrong[0]?.[0]}: ${balances.get(wrong[0]?.[0] ?? '')} vs -${wrong[0]?.[1]}), ${extra.length} unexpected account(s)`,
            };
      },
      async cleanup() {
        await deleteQueues(client, [queueUrl, deadLetterUrl]);
        await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
        await pool.end();
        client.destroy();
      },
    };
  },
};
