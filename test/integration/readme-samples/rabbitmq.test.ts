import { describe, expect, it } from 'vitest';
import { amqpAdmin } from '../../../packages/rabbitmq/test/integration/fixtures/env.js';
import { serviceUrls, waitFor } from '../../support/index.js';
import { type BrokerSide, runSample } from './harness.js';

// packages/rabbitmq/README.md's first sample, run as a program exactly as written against RabbitMQ
// and fed by plain amqplib sendToQueue calls: with the `messageId` property (the sample's idOf
// line deleted, as its comment says) and without any id (the sample's idOf). The sample declares
// its queue (`orders`, as written), so the test first drops what an earlier run left of it, and
// the producer waits until the program consumes (RabbitMQ drops what is sent to a missing queue).
const QUEUE = 'orders';
const CONSUMER = 'receipts';

async function rabbitSide(): Promise<BrokerSide> {
  const admin = await amqpAdmin(QUEUE);
  const consumers = async () => {
    const ch = await admin.conn.createChannel();
    ch.on('error', () => {});
    try {
      return (await ch.checkQueue(QUEUE)).consumerCount;
    } catch {
      return 0; // not declared yet (the 404 closed the throwaway channel)
    } finally {
      await ch.close().catch(() => {});
    }
  };
  return {
    replace: [],
    env: { AMQP_URL: serviceUrls().amqpUrl },
    prepare: () => admin.dropTopology(QUEUE),
    consuming: () => waitFor(`a consumer on ${QUEUE}`, async () => (await consumers()) > 0),
    async send(messages, withIdHeader) {
      await admin.publishMany(
        QUEUE,
        messages.map((m) => ({ body: m.body, options: withIdHeader ? { messageId: m.id } : {} })),
      );
    },
    drained: () => waitFor(`${QUEUE} to be empty`, async () => (await admin.count(QUEUE)) === 0),
    async checkAfterExit() {
      // The program's connection is closed: anything unacked would be ready again.
      expect(await admin.count(QUEUE), 'nothing left unacked').toBe(0);
      expect(await admin.count(`${QUEUE}.dead`), 'nothing dead-lettered').toBe(0);
    },
    async cleanup() {
      await admin.dropTopology(QUEUE);
      await admin.close();
    },
  };
}

describe('README samples, RabbitMQ', () => {
  for (const variant of ['idOf', 'header'] as const) {
    it(`packages/rabbitmq/README.md rabbitmq-readme, ${variant === 'idOf' ? 'no id: idOf' : 'messageId property'}`, async () => {
      await runSample({
        readme: 'packages/rabbitmq/README.md',
        marker: 'rabbitmq-readme',
        table: 'order_receipts',
        consumer: CONSUMER,
        bodyOf: (id, n) => JSON.stringify({ orderId: id, amount: n }),
        variant,
        broker: await rabbitSide(),
      });
    });
  }
});
