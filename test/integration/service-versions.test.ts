import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import amqp from 'amqplib';
import { expect, it } from 'vitest';
import { createTestPool, serviceUrls } from '../support/index.js';

// The running services against docker-compose.yml's tags: RabbitMQ exactly (Debian 12 keeps
// 3.10.8), PostgreSQL by major version (Debian's security updates move the minor; the compose
// tag follows when the README's table is updated). Printed, so a run shows what it ran against.
const compose = readFileSync(fileURLToPath(new URL('../../docker-compose.yml', import.meta.url)), 'utf8');
// An image line is `image: name:tag`, or `image: ${ONCE_IMAGE_X:-name:tag}` where a local image may stand in.
const tagOf = (image: string) =>
  new RegExp(`image:\\s*(?:\\$\\{ONCE_IMAGE_[A-Z]+:-)?${image}:([^\\s}]+)`).exec(compose)?.[1] ?? '';

it('PostgreSQL runs the major version of the compose tag', async () => {
  const pool = createTestPool();
  try {
    const { rows } = await pool.query<{ v: string }>("SELECT current_setting('server_version') AS v");
    const running = rows[0]!.v.split(' ')[0]!;
    console.log(`PostgreSQL ${running}; docker-compose.yml postgres:${tagOf('postgres')}`);
    expect(running.split('.')[0]).toBe(tagOf('postgres').split('.')[0]);
  } finally {
    await pool.end();
  }
});

it('RabbitMQ runs the version of the compose tag', async () => {
  const conn = await amqp.connect(serviceUrls().amqpUrl);
  try {
    const running = String(
      (conn as unknown as { connection: { serverProperties: { version: unknown } } }).connection
        .serverProperties.version,
    );
    const tag = tagOf('rabbitmq').replace(/-management$/, '');
    console.log(`RabbitMQ ${running}; docker-compose.yml rabbitmq:${tagOf('rabbitmq')}`);
    expect(running).toBe(tag);
  } finally {
    await conn.close();
  }
});
