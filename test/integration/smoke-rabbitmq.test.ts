import { type ChannelModel, type ConsumeMessage, connect } from 'amqplib';
import { afterAll, describe, expect, it } from 'vitest';
import { serviceUrls, uniqueName } from '../support/index.js';

// Publish and consume with a manual ack on a queue of its own.
let conn: ChannelModel | undefined;

afterAll(async () => {
  await conn?.close();
});

describe('rabbitmq smoke', () => {
  it('publishes and consumes with a manual ack', async () => {
    conn = await connect(serviceUrls().amqpUrl);
    conn.on('error', () => {}); // without a listener an 'error' event crashes the worker
    const ch = await conn.createChannel();
    const queue = uniqueName('smoke');
    await ch.assertQueue(queue, { durable: false, autoDelete: false });
    const received = new Promise<ConsumeMessage>((resolve) => {
      void ch.consume(queue, (msg) => msg && resolve(msg), { noAck: false });
    });
    ch.sendToQueue(queue, Buffer.from('hello'), { messageId: 'm1' });
    const msg = await received;
    expect(msg.content.toString()).toBe('hello');
    expect(msg.properties.messageId).toBe('m1');
    ch.ack(msg);
    await ch.deleteQueue(queue);
    await ch.close();
  });
});
