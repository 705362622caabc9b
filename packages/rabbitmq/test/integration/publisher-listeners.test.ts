import { expect, it } from 'vitest';
import { createRabbitPublisher } from '../../src/index.js';
import { AMQP_URL, amqpAdmin, unique } from './fixtures/env.js';

// One publish call of a batch waits on its private signal a few times per message, each listener
// removed when its message settles. A relay round of 100 rows must not make Node print
// MaxListenersExceededWarning (the outbox-chain demo printed it for every round before).
it('a batch of 100 with an abort signal warns of no listener leak', { timeout: 60_000 }, async () => {
  const admin = await amqpAdmin('rmq-listeners');
  const queue = unique('rmq-listeners');
  await admin.ch.assertQueue(queue, { durable: true });
  const publisher = createRabbitPublisher({ url: AMQP_URL });
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  try {
    const messages = Array.from({ length: 100 }, (_, i) => ({
      id: `m${i}`,
      destination: '',
      key: queue,
      body: `{"n":${i}}`,
      headers: {},
    }));
    const results = await publisher.publish(messages, { signal: new AbortController().signal });
    expect(results.filter((r) => !r.ok)).toEqual([]);
    // Warnings are emitted on the next tick.
    await new Promise((r) => setImmediate(r));
  } finally {
    process.off('warning', onWarning);
    await publisher.stop();
    await admin.ch.deleteQueue(queue).catch(() => {});
    await admin.close();
  }
  expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
});
