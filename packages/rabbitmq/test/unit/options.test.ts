import type { PgPoolLike } from '@once/core';
import { describe, expect, it } from 'vitest';
import { RabbitConsumer } from '../../src/consumer.js';
import { resolveRabbitConsumerOptions } from '../../src/options.js';
import { RabbitPublisher } from '../../src/publisher.js';

const pool = { connect: async () => ({}), query: async () => ({}) } as unknown as PgPoolLike;
const base = { url: 'amqp://localhost', queue: 'q', pool, consumer: 'c', handler: () => {} };

describe('resolveRabbitConsumerOptions', () => {
  it('applies defaults and splits off the inbox options', () => {
    const { rabbit, inbox } = resolveRabbitConsumerOptions({ ...base, maxAttempts: 3 });
    expect(rabbit).toMatchObject({
      queue: 'q',
      prefetch: 20,
      concurrency: 1,
      batch: false,
      batchSize: 20,
      queueType: 'quorum',
      deadLetterExchange: 'q.dlx',
      deadLetterQueue: 'q.dead',
      retryTiersMs: [1000, 10000, 60000],
    });
    expect(rabbit.socketOptions.clientProperties).toEqual({ connection_name: 'once:c' });
    // Bounds on the broker path: a 15 s heartbeat unless the URL names one, a connect deadline.
    expect(rabbit.url).toBe('amqp://localhost?heartbeat=15');
    expect(rabbit.socketOptions.timeout).toBe(10_000);
    expect(resolveRabbitConsumerOptions({ ...base, url: 'amqp://localhost?heartbeat=5' }).rabbit.url).toBe(
      'amqp://localhost?heartbeat=5',
    );
    expect(inbox).toMatchObject({ consumer: 'c', maxAttempts: 3 });
    expect('queue' in inbox).toBe(false);
  });

  it.each([
    [{ url: 'http://x' }, "option 'url'"],
    [{ queue: '' }, "option 'queue'"],
    [{ prefetch: 0 }, "option 'prefetch'"],
    [{ prefetch: 1.5 }, "option 'prefetch'"],
    [{ concurrency: -1 }, "option 'concurrency'"],
    [{ queueType: 'stream' }, "option 'queueType'"],
    [{ retryTiersMs: [] }, "option 'retryTiersMs'"],
    [{ retryTiersMs: [1000, -1] }, "option 'retryTiersMs[1]'"],
    [{ batch: 'yes' }, "option 'batch'"],
    [
      { maxRedeliveries: 5 },
      "createRabbitConsumer: option 'maxRedeliveries' was removed: use core's 'maxAttempts'",
    ],
    [{ prefech: 5 }, "did you mean 'prefetch'?"],
    [{ queue: undefined }, "option 'queue' is required"],
    [{ handler: undefined }, "option 'handler' is required"],
    [{ deadLetterExchange: '' }, "option 'deadLetterExchange'"],
  ])('names the bad field: %j', (patch, field) => {
    expect(() => resolveRabbitConsumerOptions({ ...base, ...(patch as object) })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringContaining(field) }),
    );
  });

  it('the consumer name defaults to the queue', () => {
    const { consumer: _, ...rest } = base;
    expect(resolveRabbitConsumerOptions(rest).rabbit).toMatchObject({ consumer: 'q' });
    expect(new RabbitConsumer(rest).inbox.consumer).toBe('q');
  });

  it('the consumer validates its inbox options too', () => {
    expect(() => new RabbitConsumer({ ...base, maxAttempts: 0 })).toThrow(/option 'maxAttempts'/);
    expect(() => new RabbitConsumer({ ...base, handler: 1 as never })).toThrow(/option 'handler'/);
  });

  it('the publisher validates its url', () => {
    expect(() => new RabbitPublisher({ url: 'localhost' })).toThrow(/option 'url'/);
  });
});
