import amqp from 'amqplib';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEARTBEAT_S } from '../../src/heartbeat.js';
import { resolveRabbitConsumerOptions } from '../../src/options.js';
import { AMQP_URL } from './fixtures/env.js';

// The consumer's connection asks for a 15 s AMQP heartbeat unless the URL names one: the broker
// and the client then each notice a dark path after two missed beats, not RabbitMQ's 60 s ones.
const pool = { connect: async () => ({}), query: async () => ({}) } as never;

async function negotiated(url: string | amqp.Options.Connect): Promise<number> {
  const { rabbit } = resolveRabbitConsumerOptions({
    url,
    queue: 'q',
    pool,
    consumer: 'hb',
    handler: () => {},
  });
  const conn = await amqp.connect(rabbit.url, rabbit.socketOptions);
  try {
    return (conn as unknown as { connection: { heartbeat: number } }).connection.heartbeat;
  } finally {
    await conn.close();
  }
}

describe('AMQP heartbeat', () => {
  it("reaches the connection once opens: 15 s by default, the URL's own when it names one", async () => {
    expect(DEFAULT_HEARTBEAT_S).toBe(15);
    expect(await negotiated(AMQP_URL)).toBe(15);
    const own = new URL(AMQP_URL);
    own.searchParams.set('heartbeat', '7');
    expect(await negotiated(own.toString())).toBe(7);
    const u = new URL(AMQP_URL);
    expect(
      await negotiated({
        hostname: u.hostname,
        port: Number(u.port || 5672),
        username: decodeURIComponent(u.username || 'guest'),
        password: decodeURIComponent(u.password || 'guest'),
      }),
    ).toBe(15);
  });
});
