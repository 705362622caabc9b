import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import {
  createRabbitConsumer,
  Header,
  type RabbitConsumer,
  type RabbitConsumerOptions,
} from '../../src/index.js';
import { AMQP_URL, amqpAdmin, recordOf, unique, waitFor } from './fixtures/env.js';

let db: Awaited<ReturnType<typeof freshDb>>;
let admin: Awaited<ReturnType<typeof amqpAdmin>>;
const run = unique('rmq-retry');
const consumers: RabbitConsumer[] = [];
const queues: [string, number[]][] = [];

beforeAll(async () => {
  db = await freshDb('rmq_retry', 8);
  admin = await amqpAdmin(run);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  for (const [q, tiers] of queues) await admin.dropTopology(q, tiers);
  await admin.close();
  await db.close();
});

async function start(queue: string, tiers: number[], patch: Partial<RabbitConsumerOptions>) {
  const c = createRabbitConsumer({
    url: AMQP_URL,
    queue,
    pool: db.pool,
    schema: db.schema,
    consumer: queue,
    retryTiersMs: tiers,
    socketOptions: { clientProperties: { connection_name: `${run}-${queue}` } },
    handler: () => {},
    ...patch,
  });
  consumers.push(c);
  queues.push([queue, tiers]);
  await c.start();
  return c;
}

it('retry tiers: a 1 s retry is not held behind a 60 s one', async () => {
  const queue = unique(`${run}-tiers`);
  const done: string[] = [];
  const failedOnce = new Set<string>();
  await start(queue, [1000, 60_000], {
    // Attempt 1 waits 1 s; attempt 2 and later wait 60 s.
    retryDelayMs: (attempt) => (attempt >= 2 ? 60_000 : 1_000),
    handler: async (e, { tx }) => {
      if (!failedOnce.has(e.id!)) {
        failedOnce.add(e.id!);
        throw new Error('transient, once');
      }
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
      done.push(e.id!);
    },
  });
  // "slow" is already on its 2nd attempt, so its retry goes to the 60 s tier, and is published first.
  await admin.publish(queue, 'slow', { messageId: 'slow', headers: { [Header.attempt]: 2 } });
  await waitFor(async () => (await admin.count(`${queue}.retry.60000ms`)) === 1, 10_000, 'slow parked');
  const t0 = Date.now();
  await admin.publish(queue, 'fast', { messageId: 'fast' });
  await waitFor(() => done.includes('fast'), 10_000, 'fast retried');
  expect(Date.now() - t0).toBeLessThan(10_000);
  expect(done).toEqual(['fast']);
  // The slow one is still waiting in its own tier.
  expect(await admin.count(`${queue}.retry.60000ms`)).toBe(1);
});

it('poison: dead-lettered after maxAttempts with the error in headers, attempts counted in our header', async () => {
  const queue = unique(`${run}-poison`);
  let runs = 0;
  await start(queue, [50], {
    maxAttempts: 3,
    handler: () => {
      runs++;
      throw new Error('always broken');
    },
  });
  await admin.publish(queue, '{"x":1}', {
    messageId: 'p1',
    contentType: 'application/json',
    headers: { trace: 't-1' },
  });
  await waitFor(async () => (await admin.count(`${queue}.dead`)) === 1, 20_000, 'dead letter');
  const [dead] = await admin.drain(`${queue}.dead`);
  expect(runs).toBe(3);
  expect(dead!.content.toString()).toBe('{"x":1}');
  expect(dead!.properties.messageId).toBe('p1');
  expect(dead!.properties.contentType).toBe('application/json');
  expect(dead!.properties.headers).toMatchObject({
    trace: 't-1',
    [Header.attempt]: 3,
  });
  expect(recordOf(dead!)).toMatchObject({
    reason: 'max-attempts',
    error: { name: 'Error', message: 'always broken' },
    attempts: 3,
    consumer: queue,
    id: 'p1',
    origin: { broker: 'rabbitmq', queue },
  });
  // A redelivery of the failed id is dead-lettered again, not acked as a duplicate.
  await admin.publish(queue, '{"x":1}', { messageId: 'p1' });
  await waitFor(async () => (await admin.count(`${queue}.dead`)) === 1, 20_000, 'second dead letter');
  const [again] = await admin.drain(`${queue}.dead`);
  expect(recordOf(again!)?.reason).toBe('previously-failed');
  expect(runs).toBe(3);
});
