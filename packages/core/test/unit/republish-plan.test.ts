import { describe, expect, it } from 'vitest';
import { republishPlan } from '../../src/admin/republish-plan.js';

const key = { consumer: 'c', messageId: 'm' };
const row = (origin: Record<string, unknown>) => ({ body: Buffer.from('b'), bodyTruncated: false, origin });

describe('republishPlan: the default destination', () => {
  it.each([
    ['kafka', 'orders-topic'],
    ['sqs', 'http://127.0.0.1:9324/000000000000/orders'],
    ['nats', 'orders.eu'],
  ])('%s: the source it came from', (broker, queue) => {
    expect(republishPlan('s', key, row({ broker, queue, key: 'k' }), {})).toMatchObject({
      destination: queue,
      key: 'k',
    });
  });

  it('rabbitmq: none (a queue is not an exchange)', () => {
    expect(() => republishPlan('s', key, row({ broker: 'rabbitmq', queue: 'q' }), {})).toThrow();
  });

  it("NATS: JetStream's Nats-* headers stay behind, the message's own go with it", () => {
    const plan = republishPlan(
      's',
      key,
      row({
        broker: 'nats',
        queue: 'orders.eu',
        headers: { 'Nats-Msg-Id': 'm', 'Nats-Expected-Last-Sequence': '4', tenant: 't1' },
      }),
      {},
    );
    expect(plan.headers).toEqual({ tenant: 't1' });
  });
});
