// @ts-check
// The reservations consumer as a long-running process. Configured by environment:
//   INVENTORY_SCHEMA, INVENTORY_SUBJECT, INVENTORY_DEAD_SUBJECT (required), INVENTORY_CONSUMER,
//   INVENTORY_ACK_WAIT_MS (default 15000), DATABASE_URL, NATS_URL.
// Prints one JSON line of its outcome counts every 50 ms and on exit; SIGTERM stops it gracefully
// (what it holds is finished and acked first).
import { createNatsConsumer } from '@once/nats';
import pg from 'pg';
import { runReporting } from '../../../scripts/demo/consumer-main.mjs';
import { reserveHandler } from './inventory.mjs';

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required (see the top of src/consumer.mjs)`);
  return value;
}

const schema = required('INVENTORY_SCHEMA');
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
pool.on('error', (err) => console.error('pool error:', err.message));
const consumer = createNatsConsumer({
  servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
  subject: required('INVENTORY_SUBJECT'),
  deadLetterSubject: required('INVENTORY_DEAD_SUBJECT'),
  consumer: process.env.INVENTORY_CONSUMER ?? 'example.inventory',
  pool,
  schema,
  // One transaction for the messages of a pull.
  batch: true,
  // How soon a killed consumer's messages come back; above handlerTimeoutMs.
  handlerTimeoutMs: 10_000,
  ackWaitMs: Number(process.env.INVENTORY_ACK_WAIT_MS ?? 15_000),
  handler: reserveHandler(schema),
});

await runReporting(consumer, async () => {
  await pool.end();
});
