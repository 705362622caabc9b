// @ts-check
// One service as a long-running process (what `npm run demo` starts, SIGKILLs and restarts):
//   node src/service.mjs http       the payments service: POST /charges on 127.0.0.1:PORT, and its relay
//   node src/service.mjs receipts   the receipts service: the Kafka consumer of charge.created
// Env: DATABASE_URL, KAFKA_BROKERS, PAYMENTS_SCHEMA, PAYMENTS_RUN (names from src/names.mjs), PORT,
// ONCE_KAFKA_CLIENT (the Kafka client library of the publisher and consumer: kafkajs by default).
// Prints one JSON line of its inbox's outcome counts every 50 ms and on exit (for the HTTP
// service: processed = charges made, duplicate = stored responses replayed, conflict = 422, busy =
// 409); stops gracefully on SIGTERM.
import http from 'node:http';
import { nodeListener } from '@once/http/node';
import pg from 'pg';
import { runReporting } from '../../../scripts/demo/consumer-main.mjs';
import { onceKafkaClient } from '../../kafka-client.mjs';
import { namesFor } from './names.mjs';
import { createPaymentsService } from './payments-service.mjs';
import { createReceiptsConsumer } from './receipts-service.mjs';

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`environment variable ${name} is required`);
  return value;
}

const role = process.argv[2];
if (role !== 'http' && role !== 'receipts') {
  console.error('usage: node src/service.mjs http|receipts');
  process.exit(2);
}
const schema = required('PAYMENTS_SCHEMA');
const names = namesFor(required('PAYMENTS_RUN'));
const kafka = await onceKafkaClient({
  clientId: `example-payments-${role}`,
  brokers: required('KAFKA_BROKERS').split(','),
});
const pool = new pg.Pool({ connectionString: required('DATABASE_URL'), max: 8 });
pool.on('error', (err) => console.error(`pool error: ${err.message}`));

/** @type {{ inbox: Pick<import('@once/core').Inbox, 'on'>, start(): Promise<void>, stop(): Promise<void> }} */
let service;
if (role === 'http') {
  const port = Number(required('PORT'));
  const payments = createPaymentsService({ pool, schema, kafka, topic: names.topic });
  const server = http.createServer(nodeListener(payments.fetch));
  service = {
    inbox: payments.idempotency.inbox,
    async start() {
      await payments.relay.start();
      await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => resolve(undefined));
      });
    },
    /** Stops taking requests (the ones in flight finish), then the relay sends what they wrote. */
    async stop() {
      const closed = new Promise((resolve) => server.close(() => resolve(undefined)));
      server.closeIdleConnections();
      await closed;
      await payments.stop();
    },
  };
} else {
  const receipts = createReceiptsConsumer({ kafka, pool, schema, ...names });
  service = { inbox: receipts.inbox, start: () => receipts.start(), stop: () => receipts.stop() };
}

await runReporting(service, () => pool.end());
