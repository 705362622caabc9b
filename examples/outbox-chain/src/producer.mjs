// @ts-check
// Publishes orders to a Kafka topic (created here, 3 partitions): `count` unique ones, plus a
// share sent again with the same message id and body (a producer's retry), a little after the
// original. Kafka has no deduplication across sends, so the copies reach the consumer.
// Standalone: node src/producer.mjs <topic> [count=20] [dupShare=0.25]   (KAFKA_BROKERS from env)
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';

/** How far behind its original a re-send may be published, in messages. */
const RESEND_SPREAD = 40;
/** Messages per produce request. */
const CHUNK = 500;

/**
 * @typedef {object} PublishOrdersOptions
 * @property {import('kafkajs').Kafka} kafka
 * @property {string} topic created if missing
 * @property {string} run prefix of the order ids, unique per run
 * @property {number} count unique orders
 * @property {number} dupShare share (0..1) of them published again with the same id
 */

/**
 * @param {PublishOrdersOptions} options
 * @returns {Promise<{ sent: number, unique: number }>}
 */
export async function publishOrders({ kafka, topic, run, count, dupShare }) {
  /** @type {{ id: string, at: number }[]} */
  const order = [];
  for (let i = 0; i < count; i++) {
    const id = `order-${run}-${i}`;
    order.push({ id, at: i });
    if (Math.random() < dupShare) order.push({ id, at: i + 0.5 + Math.random() * RESEND_SPREAD });
  }
  order.sort((a, b) => a.at - b.at);
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
  const producer = kafka.producer();
  await producer.connect();
  try {
    for (let i = 0; i < order.length; i += CHUNK) {
      const messages = order.slice(i, i + CHUNK).map(({ id }) => {
        const n = Number(id.split('-').at(-1));
        const body = { orderId: id, customer: `customer-${n % 50}`, totalCents: 1000 + (n % 90) * 10 };
        // The order id is the message id (header) and the key (one partition per order).
        return { key: id, value: JSON.stringify(body), headers: { 'message-id': id } };
      });
      await producer.send({ topic, messages });
    }
  } finally {
    await producer.disconnect();
  }
  return { sent: order.length, unique: count };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [topic, count = '20', dupShare = '0.25'] = process.argv.slice(2);
  if (!topic) {
    console.error('usage: node src/producer.mjs <topic> [count] [dupShare]');
    process.exit(2);
  }
  const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
  const kafka = new Kafka({ brokers, logLevel: logLevel.NOTHING });
  const run = Date.now().toString(36);
  const r = await publishOrders({ kafka, topic, run, count: Number(count), dupShare: Number(dupShare) });
  console.log(`published ${r.sent} orders (${r.unique} unique) to ${topic}`);
}
