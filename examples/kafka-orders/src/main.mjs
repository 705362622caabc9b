// @ts-check
// `npm start`: a short standalone run. It publishes 40 orders from 5 customers (a quarter of them
// re-sent with the same id) and one malformed order, consumes them in this process, and prints
// each customer's orders and ledger debits next to what they must be: every order written once,
// the ledger balanced, the malformed order dead-lettered to `<topic>.dlq`.
//   npm run services start && npm run build && npm start -w @once/example-kafka-orders
import pg from 'pg';
import { checkOrders } from './check.mjs';
import { createTopics, DATABASE_URL, deleteTopics, kafkaClient, onceClient } from './kafka.mjs';
import { createTables } from './orders.mjs';
import { createOrdersConsumer } from './orders-consumer.mjs';
import { publishOrders } from './producer.mjs';

const SCHEMA = 'example_kafka_orders';
const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 6 });
pool.on('error', (err) => console.error('pool error:', err.message));
const kafka = kafkaClient();

// A fresh schema, topic and group per run, so the table below is this run's alone.
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await createTables(pool, SCHEMA);
const run = Date.now().toString(36);
const topic = `example-orders-${run}`;
await createTopics(kafka, topic);

const sent = await publishOrders({
  kafka,
  topic,
  count: 40,
  dupShare: 0.25,
  run,
  customers: 5,
  malformed: 1,
});
console.log(
  `sent ${sent.sent} messages: ${sent.orders.length} orders, ${sent.sent - sent.unique} re-sent, 1 malformed`,
);

const consumer = createOrdersConsumer({
  kafka: await onceClient(),
  pool,
  schema: SCHEMA,
  topic,
  groupId: `example-orders-${run}`,
});
const seen = { processed: 0, duplicate: 0, failed: 0 };
consumer.inbox.on('message:processed', () => seen.processed++);
consumer.inbox.on('message:duplicate', () => seen.duplicate++);
consumer.inbox.on('message:failed', () => seen.failed++);
consumer.on('message:dead-lettered', (e) =>
  console.log(`dead-lettered ${e.id} (offset ${e.source.offset}) to ${e.deadLetter}: ${e.reason}`),
);
await consumer.start();
const until = Date.now() + 60_000;
while (seen.processed + seen.duplicate + seen.failed < sent.sent && Date.now() < until)
  await new Promise((r) => setTimeout(r, 100));
await consumer.stop();

const result = await checkOrders(pool, SCHEMA, sent.orders);
console.table(
  result.customers.map((c) => ({
    customer: c.customer,
    orders: c.orders,
    'debited (cents)': c.debitedCents,
    'must be': c.expectedCents,
    once: c.debitedCents === c.expectedCents,
  })),
);
console.log(`outcomes: ${JSON.stringify(seen)}`);
console.log(`${result.ok ? 'holds' : 'FAILS'}: ${result.detail}`);
await deleteTopics(kafka, topic);
await pool.end();
process.exitCode = result.ok ? 0 : 1;
