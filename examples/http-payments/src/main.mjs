// @ts-check
// POST /charges with an Idempotency-Key, end to end, in one process. Run against the local services:
//   npm run services start && npm run build && npm start -w @once/example-http-payments
// Starts the payments service (node:http on 127.0.0.1, its relay to Kafka) and the receipts
// service, then sends 20 charges with the retrying client: some twice at once with one key, some
// with their response lost on purpose and retried. It prints each charge with its receipts: one each.

import http from 'node:http';
import { quoteIdentifier } from '@once/core/admin';
import { nodeListener } from '@once/http/node';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { onceKafkaClient } from '../../kafka-client.mjs';
import { ChargeClient, planCharges } from './client.mjs';
import { createTopics, kafkaLag } from './kafka.mjs';
import { namesFor } from './names.mjs';
import { createPaymentsService } from './payments-service.mjs';
import { createReceiptsConsumer } from './receipts-service.mjs';
import { setupSchema } from './schema.mjs';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const KAFKA_BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const SCHEMA = 'example_http_payments';
const s = quoteIdentifier(SCHEMA, 'schema');

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
pool.on('error', (err) => console.error('pool error', err.message));
// A fresh schema each run; it is kept afterwards, to look at.
await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
await setupSchema(pool, SCHEMA);

const run = Date.now().toString(36);
const names = namesFor(run);
const kafka = new Kafka({ brokers: KAFKA_BROKERS, logLevel: logLevel.NOTHING });
const admin = kafka.admin();
await admin.connect();
await createTopics(admin, names.topic);

// once's publisher and consumer on the library ONCE_KAFKA_CLIENT names (kafkajs by default).
const onceClient = await onceKafkaClient({ clientId: 'example-http-payments', brokers: KAFKA_BROKERS });
const payments = createPaymentsService({ pool, schema: SCHEMA, kafka: onceClient, topic: names.topic });
const receipts = createReceiptsConsumer({ kafka: onceClient, pool, schema: SCHEMA, ...names });
const server = http.createServer(nodeListener(payments.fetch));
await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
const address = /** @type {import('node:net').AddressInfo} */ (server.address());
await Promise.all([payments.relay.start(), receipts.start()]);
console.log(`payments service on http://127.0.0.1:${address.port}/charges`);

const plan = planCharges({ run, count: 20, dupShare: 0.3 });
const client = new ChargeClient({
  urls: [`http://127.0.0.1:${address.port}`],
  concurrency: 4,
  lostShare: 0.3,
});
await client.run(plan);
const st = client.stats;
console.log(
  `${plan.length} charges in ${st.requests} requests: ${st.replayed} replayed, ${st.lost} responses lost and retried, ` +
    `${st.mismatch422} key re-used with another amount refused with 422`,
);

const until = Date.now() + 60_000;
for (;;) {
  const { rows } = await pool.query(
    `SELECT (SELECT count(*)::int FROM ${s}.receipts) AS receipts,
            (SELECT count(*)::int FROM ${s}.outbox WHERE status = 'pending') AS unsent`,
  );
  const lag = await kafkaLag(admin, names.topic, names.groupId);
  if ((rows[0].receipts >= plan.length && rows[0].unsent === 0 && lag === 0) || Date.now() > until) break;
  await new Promise((r) => setTimeout(r, 200));
}
await new Promise((resolve) => server.close(() => resolve(undefined)));
await Promise.all([payments.stop(), receipts.stop()]);

const { rows } = await pool.query(
  `SELECT c.account, c.idempotency_key AS key, c.amount_cents, left(c.charge_id, 11) AS charge,
          (SELECT count(*)::int FROM ${s}.receipts r WHERE r.charge_id = c.charge_id) AS receipts
   FROM ${s}.charges c ORDER BY c.seq`,
);
console.table(rows);
const once =
  rows.length === plan.length && rows.every((r) => r.receipts === 1) && client.problems.length === 0;
console.log(
  `${rows.length} charges for ${plan.length} keys, each with one receipt: ${once ? 'yes' : 'NO'}` +
    (client.problems.length ? `; ${client.problems.join('; ')}` : ''),
);

const topics = await admin.listTopics();
await admin.deleteTopics({ topics: [names.topic, `${names.topic}.dlq`].filter((t) => topics.includes(t)) });
await admin.disconnect();
await pool.end();
process.exitCode = once ? 0 : 1;
