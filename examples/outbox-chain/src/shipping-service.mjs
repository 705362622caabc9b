// @ts-check
// The shipping service: consumes `order-accepted` events from RabbitMQ and writes one shipment
// per event, once. The event's message id is its outbox row id, so a re-send by the relay (after
// a crash between publishing and marking the row sent) is a duplicate here.

import { PermanentError } from '@once/core';
import { quoteIdentifier } from '@once/core/admin';
import { createRabbitConsumer, jsonHandler } from '@once/rabbitmq';

/** The consumer name shipments are recorded under. */
export const SHIPPING_CONSUMER = 'example.shipping';

/** Retry delay tiers of the shipping consumer, in ms. */
export const RETRY_TIERS_MS = [1_000, 5_000];

/**
 * The queues the shipping consumer of `queue` reads or fills (its topology, see @once/rabbitmq),
 * without the dead-letter queue `<queue>.dead`.
 * @param {string} queue
 */
export function queuesOf(queue) {
  return [queue, ...RETRY_TIERS_MS.map((ms) => `${queue}.retry.${ms}ms`)];
}

/**
 * @param {unknown} v
 * @returns {{ orderId: string, customer: string }}
 */
function orderAccepted(v) {
  const e = /** @type {Record<string, unknown>} */ (v);
  if (e?.type !== 'order-accepted' || typeof e.orderId !== 'string' || typeof e.customer !== 'string')
    throw new PermanentError('not an order-accepted event with string orderId and customer');
  return /** @type {{ orderId: string, customer: string }} */ (e);
}

/**
 * Creates the consumer (not started).
 * @param {{ pool: import('pg').Pool, schema: string, amqpUrl: string, queue: string }} options
 */
export function createShippingConsumer({ pool, schema, amqpUrl, queue }) {
  const s = quoteIdentifier(schema, 'schema');
  return createRabbitConsumer({
    url: amqpUrl,
    queue,
    pool,
    schema,
    consumer: SHIPPING_CONSUMER,
    prefetch: 50,
    batch: true,
    retryTiersMs: RETRY_TIERS_MS,
    handler: jsonHandler(async (body, _envelope, ctx) => {
      const event = orderAccepted(body);
      await ctx.tx.query(`INSERT INTO ${s}.shipments (order_id, event_id, address) VALUES ($1, $2, $3)`, [
        event.orderId,
        ctx.id,
        `${event.customer}'s address`,
      ]);
    }),
  });
}
