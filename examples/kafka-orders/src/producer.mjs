// @ts-check
// Publishes orders keyed by customer (one customer's orders stay in order on one partition), then
// re-sends a share of them with the same `message-id` header: an application-level retry that
// Kafka's idempotent producer cannot catch, since it is a new record at a new offset.
//
//   node src/producer.mjs <topic> [count=100] [dup-share=0.25]
import { pathToFileURL } from 'node:url';
import { createKafkaPublisher } from '@once/kafka';
import { kafkaClient } from './kafka.mjs';

/** @typedef {import('./orders.mjs').Order} Order */
/** @typedef {{ id: string } & Order} SentOrder */

const SKUS = ['kettle', 'teapot', 'mug', 'tray', 'strainer'];

/**
 * @param {object} o
 * @param {import('kafkajs').Kafka} o.kafka
 * @param {string} o.topic
 * @param {number} o.count unique orders
 * @param {number} o.dupShare share of them sent a second time with the same id
 * @param {string} o.run makes the order ids unique to this run
 * @param {number} [o.customers] distinct keys
 * @param {number} [o.malformed] extra messages whose body is not an order (dead-lettered)
 * @returns {Promise<{ sent: number, unique: number, orders: SentOrder[], malformedIds: string[] }>}
 */
export async function publishOrders({ kafka, topic, count, dupShare, run, customers = 20, malformed = 0 }) {
  /** @type {SentOrder[]} */
  const orders = Array.from({ length: count }, (_, i) => ({
    id: `order-${run}-${i}`,
    customer: `cust-${i % customers}`,
    sku: SKUS[i % SKUS.length] ?? 'mug',
    cents: 100 + Math.floor(Math.random() * 9900),
  }));
  const malformedIds = Array.from({ length: malformed }, (_, i) => `order-${run}-bad-${i}`);
  /** @param {SentOrder} o */
  const message = (o) => ({
    id: o.id,
    destination: topic,
    key: o.customer,
    body: JSON.stringify({ customer: o.customer, sku: o.sku, cents: o.cents }),
  });
  const again = orders.filter(() => Math.random() < dupShare);
  const all = [
    ...orders.map(message),
    ...malformedIds.map((id) => ({
      id,
      destination: topic,
      key: 'cust-0',
      body: '{"customer": "cust-0", "cents": "lots"}',
    })),
    // The re-sends: same id header, same body, published again as new records.
    ...again.map(message),
  ];
  // once's publisher (what the outbox relay uses): the id goes in the `message-id` header.
  const publisher = createKafkaPublisher({ kafka });
  try {
    for (let i = 0; i < all.length; i += 500) {
      const failed = (await publisher.publish(all.slice(i, i + 500))).filter((r) => !r.ok);
      if (failed.length) throw new Error(`Kafka refused ${failed.length} orders, e.g. ${failed[0]?.id}`);
    }
  } finally {
    await publisher.stop();
  }
  return { sent: all.length, unique: orders.length + malformedIds.length, orders, malformedIds };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [topic, count = '100', dupShare = '0.25'] = process.argv.slice(2);
  if (!topic) {
    console.error('usage: node src/producer.mjs <topic> [count] [dup-share]');
    process.exit(2);
  }
  const r = await publishOrders({
    kafka: kafkaClient(),
    topic,
    count: Number(count),
    dupShare: Number(dupShare),
    run: Date.now().toString(36),
  });
  console.log(`sent ${r.sent} messages: ${r.unique} unique orders, ${r.sent - r.unique} re-sent`);
}
