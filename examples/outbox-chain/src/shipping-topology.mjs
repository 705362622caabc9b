// @ts-check
// The RabbitMQ side that must exist before the relay publishes: the relay publishes with
// `mandatory`, so an event with no queue bound would be returned and retried, not lost.
import amqp from 'amqplib';

/**
 * Declares the fanout exchange of `order-accepted` events and the shipping queue bound to it.
 * @param {string} amqpUrl
 * @param {{ exchange: string, queue: string }} names
 */
export async function declareShipping(amqpUrl, { exchange, queue }) {
  const connection = await amqp.connect(amqpUrl);
  try {
    const ch = await connection.createChannel();
    await ch.assertExchange(exchange, 'fanout', { durable: true });
    // Quorum, as the shipping consumer declares it (the arguments must match).
    await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await ch.bindQueue(queue, exchange, '');
  } finally {
    await connection.close();
  }
}
