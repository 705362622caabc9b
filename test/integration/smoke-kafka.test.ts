import { Kafka, logLevel } from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { createTopicsReady, serviceUrls, uniqueName } from '../support/index.js';

// A produce/consume round trip on a topic of its own: the broker is up, has a controller, and
// can run a consumer group (the group coordinator is what a fresh single-node KRaft broker lacks
// longest, while it creates __consumer_offsets).
const kafka = new Kafka({
  clientId: 'smoke-kafka',
  brokers: [...serviceUrls().kafkaBrokers],
  logLevel: logLevel.NOTHING,
});
const admin = kafka.admin();
const producer = kafka.producer();
const consumer = kafka.consumer({
  groupId: uniqueName('smoke-group'),
  sessionTimeout: 6000,
  heartbeatInterval: 1000,
});
const topic = uniqueName('smoke-topic');

afterAll(async () => {
  await consumer.disconnect();
  await producer.disconnect();
  await admin.deleteTopics({ topics: [topic] }).catch(() => {});
  await admin.disconnect();
});

describe('kafka smoke', () => {
  it('produces and consumes a message', async () => {
    await admin.connect();
    expect(await createTopicsReady(admin, { [topic]: 1 })).toBe(true);
    await producer.connect();
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    const received = new Promise<{ key: string; value: string }>((resolve) => {
      void consumer.run({
        eachMessage: async ({ message }) => {
          resolve({ key: String(message.key), value: String(message.value) });
        },
      });
    });
    await producer.send({ topic, messages: [{ key: 'k1', value: 'hello' }] });
    expect(await received).toEqual({ key: 'k1', value: 'hello' });
  });
});
