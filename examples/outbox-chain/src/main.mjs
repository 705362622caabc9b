// @ts-check
// Consume, write, publish on. Run against the local services:
//   npm run services start && npm run build && npm start -w @once/example-outbox-chain
// Orders (some sent twice with the same message id) arrive on a Kafka topic. The order service
// writes each order and its `order-accepted` event in one transaction (the event goes into the
// outbox); its relay sends the events to a RabbitMQ exchange; the shipping service writes one
// shipment per event. It prints each order with its shipments: one each.
import { quoteIdentifier } from '@once/core/admin';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { onceKafkaClient } from '../../kafka-client.mjs';
import { kafkaLag } from './kafka-lag.mjs';
import { namesFor } from './names.mjs';
import { createOrderService } from './order-service.mjs';
import { publishOrders } from './producer.mjs';
import { setupSchema } from './schema.mjs';
import { createShippingConsumer, queuesOf } from './shipping-service.mjs';
import { declareShipping } from './shipping-topology.mjs';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const KAFKA_BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const SCHEMA = 'example_outbox_chain';
const s = quoteIdentifier(SCHEMA, 'schema');

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
pool.on('error', (err) => console.error('pool error', err.message));
// A fresh schema each run; it is kept afterwards, to look at.
await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
await setupSchema(pool, SCHEMA);

const run = Date.now().toString(36);
const names = namesFor(run);
const kafka = new Kafka({ brokers: KAFKA_BROKERS, logLevel: logLevel.NOTHING });
await declareShipping(AMQP_URL, names);
const { sent, unique } = await publishOrders({ kafka, topic: names.topic, run, count: 20, dupShare: 0.3 });
console.log(`published ${sent} orders to Kafka, ${unique} unique`);

const orders = createOrderService({
  pool,
  schema: SCHEMA,
  // The once client, on the library ONCE_KAFKA_CLIENT names (kafkajs by default).
  kafka: await onceKafkaClient({ clientId: 'example-outbox-chain', brokers: KAFKA_BROKERS }),
  amqpUrl: AMQP_URL,
  ...names,
});
orders.consumer.inbox.on('message:duplicate', (e) => console.log(`order service: duplicate ${e.id} dropped`));
const shipping = createShippingConsumer({ pool, schema: SCHEMA, amqpUrl: AMQP_URL, queue: names.queue });
await Promise.all([orders.start(), shipping.start()]);

const admin = kafka.admin();
await admin.connect();
const until = Date.now() + 60_000;
for (;;) {
  const { rows } = await pool.query(
    `SELECT (SELECT count(DISTINCT order_id)::int FROM ${s}.shipments) AS shipped,
            (SELECT count(*)::int FROM ${s}.outbox WHERE status = 'pending') AS unsent`,
  );
  const lag = await kafkaLag(admin, names.topic, names.groupId);
  if ((rows[0].shipped === unique && rows[0].unsent === 0 && lag === 0) || Date.now() > until) break;
  await new Promise((r) => setTimeout(r, 200));
}
// Let the shipping consumer see any re-sent event before stopping.
await new Promise((r) => setTimeout(r, 500));
await Promise.all([orders.stop(), shipping.stop()]);

const { rows } = await pool.query(
  `SELECT o.order_id, o.customer, o.total_cents, left(o.event_id::text, 8) AS event,
          (SELECT count(*)::int FROM ${s}.shipments sh WHERE sh.order_id = o.order_id) AS shipments
   FROM ${s}.orders o ORDER BY o.seq`,
);
console.table(rows);
const [counts] = (
  await pool.query(
    `SELECT (SELECT count(*)::int FROM ${s}.orders) AS orders,
            (SELECT count(*)::int FROM ${s}.shipments) AS shipments,
            (SELECT count(*)::int FROM ${s}.outbox WHERE status = 'sent') AS events`,
  )
).rows;
const once =
  counts.orders === unique &&
  counts.shipments === unique &&
  counts.events === unique &&
  rows.every((r) => r.shipments === 1);
console.log(
  `${counts.orders} orders, ${counts.events} events sent, ${counts.shipments} shipments for ${unique} ` +
    `unique orders: each order written, announced and shipped once: ${once ? 'yes' : 'NO'}`,
);

const connection = await amqp.connect(AMQP_URL);
const ch = await connection.createChannel();
for (const q of [...queuesOf(names.queue), `${names.queue}.dead`]) await ch.deleteQueue(q);
await ch.deleteExchange(`${names.queue}.dlx`);
await ch.deleteExchange(names.exchange);
await connection.close();
const topics = await admin.listTopics();
await admin.deleteTopics({ topics: [names.topic, `${names.topic}.dlq`].filter((t) => topics.includes(t)) });
await admin.disconnect();
await pool.end();
process.exitCode = once ? 0 : 1;
