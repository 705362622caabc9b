import { describe, expect, it } from 'vitest';
import { BROKERS } from './brokers.js';
import { recordEffect, sleep } from './harness.js';
import { messagesOf, useBroker, waitUntilDone } from './suite.js';

// Within one key (Kafka partition key, SQS message group, AMQP routing key on one queue), effects
// are recorded in publish order. Keys are interleaved and handlers take varying time, so a
// consumer that ran a key's messages side by side would show it.

describe.each(BROKERS)('%s: ordering per key', (broker, make) => {
  const t = useBroker(`conf_order_${broker}`, make);

  it('effects of each key are recorded in publish order', async () => {
    const { harness, db } = t;
    const dest = await harness.create(`conf-order-${broker}`);
    const ledger = await db.ledger();
    const messages = messagesOf(dest, 100, 5);
    await harness.publish(dest, messages);

    const record = recordEffect(ledger);
    const consumer = await harness.start(dest, {
      consumer: 'order',
      handler: async (envelope, ctx) => {
        await sleep(Math.random() * 4);
        await record(envelope, ctx);
      },
    });
    await waitUntilDone(harness, dest, 'order', ledger, messages.length);
    await consumer.stop();

    expect(await harness.settled(dest, 'order')).toBe(true);
    const verdict = await ledger.check({ expectedIds: messages.map((m) => m.id), checkOrderPerKey: true });
    expect(verdict.orderViolations).toEqual([]);
    expect(verdict.lost).toEqual([]);
    expect(verdict.duplicated).toEqual([]);
    expect(verdict.ok).toBe(true);
  });
});
