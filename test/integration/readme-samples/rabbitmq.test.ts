import { describe, expect, it } from 'vitest';
import { amqpAdmin } from '../../../packages/rabbitmq/test/integration/fixtures/env.js';
import { serviceUrls, uniqueName, waitFor } from '../../support/index.js';
import { type BrokerSide, runSample } from './harness.js';

// packages/rabbitmq/README.md's first sample, run as a program against RabbitMQ and fed by plain
// amqplib sendToQueue calls: with the `messageId` property (the sample's idOf line deleted, as its
// comment says) and without any id (the sample's idOf). The sample declares its queue, so the
// producer waits until the program consumes (RabbitMQ drops what is sent to a missing queue).
async function rabbitSide(): Promise<BrokerSide & { consumer: string }> {
  const queue = uniqueName('readme-orders');
  const consumer = uniqueName('readme-billing');
  const admin = await amqpAdmin(queue);
  const consumers = async () => {
    const ch = await admin.conn.createChannel();
    ch.on('error', () => {});
    try {
      return (await ch.checkQueue(queue)).consumerCount;
    } catch {
      return 0; // not declared yet (the 404 closed the throwaway channel)
    } finally {
      await ch.close().catch(() => {});
    }
  };
  return {
    consumer,
    replace: [
      [`url: 'amqp://guest:guest@127.0.0.1:5672'`, `url: '${serviceUrls().amqpUrl}'`],
      [`queue: 'orders'`, `queue: '${queue}'`],
      [`consumer: 'billing.orders'`, `consumer: '${consumer}'`],
    ],
    consuming: () => waitFor(`a consumer on ${queue}`, async () => (await consumers()) > 0),
    async send(messages, withIdHeader) {
      await admin.publishMany(
        queue,
        messages.map((m) => ({ body: m.body, options: withIdHeader ? { messageId: m.id } : {} })),
      );
    },
    drained: () => waitFor(`${queue} to be empty`, async () => (await admin.count(queue)) === 0),
    async checkAfterExit() {
      // The program's connection is closed: anything unacked would be ready again.
      expect(await admin.count(queue), 'nothing left unacked').toBe(0);
      expect(await admin.count(`${queue}.dead`), 'nothing dead-lettered').toBe(0);
    },
    async cleanup() {
      await admin.dropTopology(queue);
      await admin.close();
    },
  };
}

describe('README samples, RabbitMQ', () => {
  for (const variant of ['idOf', 'header'] as const) {
    it(`packages/rabbitmq/README.md rabbitmq-readme, ${variant === 'idOf' ? 'no id: idOf' : 'messageId property'}`, async () => {
      const broker = await rabbitSide();
      await runSample({
        readme: 'packages/rabbitmq/README.md',
        marker: 'rabbitmq-readme',
        table: 'charges',
        consumer: broker.consumer,
        bodyOf: (id, n) => JSON.stringify({ orderId: id, amount: n }),
        variant,
        broker,
      });
    });
  }
});
