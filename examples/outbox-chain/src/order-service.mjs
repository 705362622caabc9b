// @ts-check
// The order service: consumes orders from Kafka, writes each `orders` row and its
// `order-accepted` event in one transaction (ctx.publish writes the event into the outbox), and
// runs the relay that sends outbox rows to RabbitMQ. A crash anywhere leaves either both the row
// and the event or neither; the relay re-sends an event it is not sure of, with the same id.

import { createOutbox, createRelay, PermanentError } from '@once/core';
import { quoteIdentifier } from '@once/core/admin';
import { createKafkaConsumer } from '@once/kafka';
import { createRabbitPublisher } from '@once/rabbitmq';

/** The consumer name orders are recorded under. */
export const ORDER_CONSUMER = 'example.orders';

/**
 * @typedef {object} OrderServiceOptions
 * @property {import('pg').Pool} pool
 * @property {string} schema once's schema, also holding `orders`
 * @property {import('@once/kafka').KafkaClient} kafka the once client (../../kafka-client.mjs)
 * @property {string} topic
 * @property {string} groupId
 * @property {string} amqpUrl
 * @property {string} exchange where `order-accepted` events go
 */

/**
 * The order in a message body; anything else is a PermanentError (dead-lettered at once).
 * @param {Buffer} body
 * @returns {{ orderId: string, customer: string, totalCents: number }}
 */
export function parseOrder(body) {
  let o;
  try {
    o = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new PermanentError(`the order is not JSON: ${/** @type {Error} */ (err).message}`);
  }
  if (typeof o?.orderId !== 'string' || typeof o.customer !== 'string' || !Number.isInteger(o.totalCents))
    throw new PermanentError('an order needs string orderId and customer, and integer totalCents');
  return o;
}

/**
 * Creates the consumer, the relay and the relay's publisher (none started).
 * @param {OrderServiceOptions} options
 */
export function createOrderService({ pool, schema, kafka, topic, groupId, amqpUrl, exchange }) {
  const s = quoteIdentifier(schema, 'schema');
  const outbox = createOutbox({ pool, schema, destinations: [exchange] });
  const consumer = createKafkaConsumer({
    kafka,
    groupId,
    topics: [topic],
    consumer: ORDER_CONSUMER,
    pool,
    schema,
    outbox,
    fromBeginning: true,
    // Short, so that a member killed mid-run is dropped from the group (and its partitions handed
    // on) within seconds; the broker's group.min.session.timeout.ms must allow it (scripts/services
    // and docker-compose.yml set 1 s).
    sessionTimeoutMs: 3_000,
    heartbeatIntervalMs: 500,
    batchSize: 100,
    handler: async (envelope, ctx) => {
      const order = parseOrder(envelope.body);
      const eventId = await ctx.publish(exchange, {
        type: 'order-accepted',
        orderId: order.orderId,
        customer: order.customer,
        totalCents: order.totalCents,
      });
      await ctx.tx.query(
        `INSERT INTO ${s}.orders (order_id, customer, total_cents, event_id) VALUES ($1, $2, $3, $4)`,
        [order.orderId, order.customer, order.totalCents, eventId],
      );
    },
  });
  const publisher = createRabbitPublisher({ url: amqpUrl });
  const relay = createRelay({ pool, schema, publishers: { [exchange]: publisher }, pollIntervalMs: 250 });
  return {
    consumer,
    relay,
    async start() {
      await relay.start();
      await consumer.start();
    },
    /** Stops taking orders first, so the relay's last round sees every event written. */
    async stop() {
      await consumer.stop();
      await relay.stop();
      await publisher.stop();
    },
  };
}
