// @ts-check
// Publishes email requests to a RabbitMQ queue: `count` unique ones, plus a share sent a second
// time with the same message id and body (a producer's retry), each a little after its original so
// that some copies arrive while the original is still being sent.
// Standalone: node src/producer.mjs <queue> [count=20] [dupShare=0.25]   (AMQP_URL from env)
import { fileURLToPath } from 'node:url';
import amqp from 'amqplib';

/** How far behind its original a re-send may be published, in messages. */
const RESEND_SPREAD = 40;

/**
 * @typedef {object} PublishEmailsOptions
 * @property {string} amqpUrl
 * @property {string} queue declared here (quorum, as the consumer declares it) if missing
 * @property {string} run prefix of the message ids, unique per run
 * @property {number} count unique messages
 * @property {number} dupShare share (0..1) of them published again with the same id
 */

/**
 * @param {PublishEmailsOptions} options
 * @returns {Promise<{ sent: number, unique: number }>}
 */
export async function publishEmails({ amqpUrl, queue, run, count, dupShare }) {
  /** @type {{ id: string, at: number }[]} */
  const order = [];
  for (let i = 0; i < count; i++) {
    const id = `email-${run}-${i}`;
    order.push({ id, at: i });
    if (Math.random() < dupShare) order.push({ id, at: i + 0.5 + Math.random() * RESEND_SPREAD });
  }
  order.sort((a, b) => a.at - b.at);
  const connection = await amqp.connect(amqpUrl);
  try {
    const ch = await connection.createConfirmChannel();
    await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    for (const { id } of order) {
      const n = Number(id.split('-').at(-1));
      const body = {
        to: `customer${n}@example.test`,
        subject: `Your order ${n} is confirmed`,
        text: 'Thanks!',
      };
      ch.sendToQueue(queue, Buffer.from(JSON.stringify(body)), {
        messageId: id,
        persistent: true,
        contentType: 'application/json',
      });
    }
    await ch.waitForConfirms();
  } finally {
    await connection.close();
  }
  return { sent: order.length, unique: count };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [queue, count = '20', dupShare = '0.25'] = process.argv.slice(2);
  if (!queue) {
    console.error('usage: node src/producer.mjs <queue> [count] [dupShare]');
    process.exit(2);
  }
  const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
  const run = Date.now().toString(36);
  const r = await publishEmails({ amqpUrl, queue, run, count: Number(count), dupShare: Number(dupShare) });
  console.log(`published ${r.sent} messages (${r.unique} unique) to ${queue}`);
}
