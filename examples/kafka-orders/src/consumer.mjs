// @ts-check
// The orders consumer as a long-running process. Configured by environment:
//   ORDERS_SCHEMA, ORDERS_TOPIC, ORDERS_GROUP (required), DATABASE_URL, KAFKA_BROKERS,
//   ONCE_KAFKA_CLIENT (the client library: kafkajs by default, platformatic or confluent).
// Prints one JSON line of its outcome counts every 50 ms and on exit; SIGTERM stops it gracefully
// (the slice in flight commits and its offsets are committed first).
import pg from 'pg';
import { runReporting } from '../../../scripts/demo/consumer-main.mjs';
import { DATABASE_URL, onceClient } from './kafka.mjs';
import { createOrdersConsumer } from './orders-consumer.mjs';

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required (see the top of src/consumer.mjs)`);
  return value;
}

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 6 });
pool.on('error', (err) => console.error('pool error:', err.message));
const consumer = createOrdersConsumer({
  kafka: await onceClient(),
  pool,
  schema: required('ORDERS_SCHEMA'),
  topic: required('ORDERS_TOPIC'),
  groupId: required('ORDERS_GROUP'),
});

await runReporting(consumer, () => pool.end());
