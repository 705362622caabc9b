// @ts-check
// One service of the chain as a long-running process (what `npm run demo` starts, kills and
// restarts): `node src/consumer.mjs orders` runs the order service (Kafka consumer + outbox
// relay), `node src/consumer.mjs shipments` the shipping service (RabbitMQ consumer).
// Env: DATABASE_URL, KAFKA_BROKERS, AMQP_URL, CHAIN_SCHEMA, CHAIN_RUN (names from src/names.mjs),
// ONCE_KAFKA_CLIENT (the order service's Kafka client library: kafkajs by default).
// Prints one JSON line of its consumer's outcome counts every 50 ms and on exit; stops gracefully
// on SIGTERM.
import pg from 'pg';
import { runReporting } from '../../../scripts/demo/consumer-main.mjs';
import { onceKafkaClient } from '../../kafka-client.mjs';
import { namesFor } from './names.mjs';
import { createOrderService } from './order-service.mjs';
import { createShippingConsumer } from './shipping-service.mjs';

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`environment variable ${name} is required`);
  return value;
}

const role = process.argv[2];
if (role !== 'orders' && role !== 'shipments') {
  console.error('usage: node src/consumer.mjs orders|shipments');
  process.exit(2);
}
const schema = required('CHAIN_SCHEMA');
const names = namesFor(required('CHAIN_RUN'));
const amqpUrl = required('AMQP_URL');
const pool = new pg.Pool({ connectionString: required('DATABASE_URL'), max: 8 });
pool.on('error', (err) => console.error(`pool error: ${err.message}`));

/** @type {{ inbox: import('@once/core').Inbox, start(): Promise<void>, stop(): Promise<void> }} */
let service;
if (role === 'orders') {
  const kafka = await onceKafkaClient({
    clientId: 'example-outbox-chain',
    brokers: required('KAFKA_BROKERS').split(','),
  });
  const orders = createOrderService({ pool, schema, kafka, amqpUrl, ...names });
  service = { inbox: orders.consumer.inbox, start: orders.start, stop: orders.stop };
} else {
  const shipping = createShippingConsumer({ pool, schema, amqpUrl, queue: names.queue });
  service = { inbox: shipping.inbox, start: () => shipping.start(), stop: () => shipping.stop() };
}

await runReporting(service, () => pool.end());
