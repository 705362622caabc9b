// @ts-check
// This example's part of `npm run demo` (see scripts/demo/example-contract.d.ts): orders with
// re-sends go to a Kafka topic; the order service (consumer + relay) writes each order and its
// `order-accepted` event through the outbox to RabbitMQ; the shipping service writes a shipment
// per event. Both processes are SIGKILLed mid-run. The effects are the shipments at the end of the
// chain; pending is everything still on its way (Kafka lag, unsent outbox rows, RabbitMQ backlog).

import { fileURLToPath } from 'node:url';
import { quoteIdentifier } from '@once/core/admin';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { rabbitBacklog } from '../../scripts/demo/rabbit-backlog.mjs';
import { kafkaLag } from './src/kafka-lag.mjs';
import { namesFor } from './src/names.mjs';
import { ORDER_CONSUMER } from './src/order-service.mjs';
import { publishOrders } from './src/producer.mjs';
import { schemaFor, setupSchema } from './src/schema.mjs';
import { queuesOf, SHIPPING_CONSUMER } from './src/shipping-service.mjs';
import { declareShipping } from './src/shipping-topology.mjs';

/** @type {import('../../scripts/demo/example-contract.js').DemoExample} */
export default {
  name: 'outbox-chain',
  broker: 'kafka',
  async prepare({ databaseUrl, run, count, dupShare }) {
    const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
    const brokers = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
    const schema = schemaFor('example_chain', run);
    const s = quoteIdentifier(schema, 'schema');
    const names = namesFor(run);
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
    pool.on('error', () => {});
    await setupSchema(pool, schema);
    await declareShipping(amqpUrl, names);
    const kafka = new Kafka({ brokers: brokers.split(','), logLevel: logLevel.NOTHING });
    const { sent, unique } = await publishOrders({ kafka, topic: names.topic, run, count, dupShare });
    const admin = kafka.admin();
    await admin.connect();
    const watch = await amqp.connect(amqpUrl);
    watch.on('error', () => {});

    const script = fileURLToPath(new URL('./src/consumer.mjs', import.meta.url));
    const env = {
      DATABASE_URL: databaseUrl,
      KAFKA_BROKERS: brokers,
      AMQP_URL: amqpUrl,
      CHAIN_SCHEMA: schema,
    };
    /**
     * @param {string} sql
     * @param {unknown[]} [values]
     */
    const one = async (sql, values) => (await pool.query(sql, values)).rows[0];
    return {
      sent,
      unique,
      consumers: [
        { script, args: ['orders'], env: { ...env, CHAIN_RUN: run } },
        { script, args: ['shipments'], env: { ...env, CHAIN_RUN: run } },
      ],
      effects: async () =>
        one(`SELECT count(*)::int AS total, count(DISTINCT order_id)::int AS unique FROM ${s}.shipments`),
      pending: async () =>
        (await kafkaLag(admin, names.topic, names.groupId)) +
        (await one(`SELECT count(*)::int AS n FROM ${s}.outbox WHERE status = 'pending'`)).n +
        (await rabbitBacklog(watch, queuesOf(names.queue))),
      verify: async () => {
        const r = await one(
          `SELECT (SELECT count(*)::int FROM ${s}.orders) AS orders,
                  (SELECT count(DISTINCT order_id)::int FROM ${s}.orders) AS order_ids,
                  (SELECT count(*)::int FROM ${s}.shipments) AS shipments,
                  (SELECT count(DISTINCT order_id)::int FROM ${s}.shipments) AS shipped_ids,
                  (SELECT count(*)::int FROM ${s}.shipments sh
                     WHERE NOT EXISTS (SELECT 1 FROM ${s}.orders o
                                       WHERE o.order_id = sh.order_id AND o.event_id = sh.event_id)) AS unmatched,
                  (SELECT count(*)::int FROM ${s}.outbox WHERE status = 'sent') AS sent,
                  (SELECT count(*)::int FROM ${s}.outbox WHERE status <> 'sent') AS unsent,
                  (SELECT count(*)::int FROM ${s}.inbox WHERE status <> 'done'
                     AND consumer IN ($1, $2)) AS not_done`,
          [ORDER_CONSUMER, SHIPPING_CONSUMER],
        );
        const dead = await rabbitBacklog(watch, [`${names.queue}.dead`]);
        const ok =
          r.orders === unique &&
          r.order_ids === unique &&
          r.shipments === unique &&
          r.shipped_ids === unique &&
          r.unmatched === 0 &&
          r.sent === unique &&
          r.unsent === 0 &&
          r.not_done === 0 &&
          dead === 0;
        return {
          ok,
          detail:
            `${r.orders} orders (${r.order_ids} ids) and ${r.shipments} shipments (${r.shipped_ids} ids) ` +
            `for ${unique} unique orders, ${r.unmatched} shipments without their order's event; outbox: ` +
            `${r.sent} events sent, ${r.unsent} unsent; ${r.not_done} messages not done, ${dead} dead-lettered ` +
            '(deliveries and duplicates add both hops: orders from Kafka, events from RabbitMQ)',
        };
      },
      cleanup: async () => {
        const ch = await watch.createChannel();
        for (const q of [...queuesOf(names.queue), `${names.queue}.dead`]) await ch.deleteQueue(q);
        await ch.deleteExchange(`${names.queue}.dlx`);
        await ch.deleteExchange(names.exchange);
        await watch.close();
        // The dead-letter topic exists only if something was dead-lettered.
        const topics = await admin.listTopics();
        await admin.deleteTopics({
          topics: [names.topic, `${names.topic}.dlq`].filter((t) => topics.includes(t)),
        });
        await admin.disconnect();
        await pool.query(`DROP SCHEMA ${s} CASCADE`);
        await pool.end();
      },
    };
  },
};
