import { createInbox, createRelay, type OutboxMessage, PermanentError, type Relay } from '@once/core';
import {
  createRabbitConsumer,
  createRabbitPublisher,
  type RabbitConsumer,
  type RabbitPublisher,
} from '@once/rabbitmq';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cli } from '../../packages/cli/test/integration/fixtures/cli.js';
import { fromJsonb, toJsonb } from '../../packages/core/src/sql/jsonb.js';
import { quoteIdent, serviceUrls, uniqueName } from '../support/index.js';
import {
  amqpAdmin,
  createTestPool,
  dropServiceDbs,
  type ServiceDb,
  serviceDb,
  waitFor,
} from './fixtures/outbox-env.js';

// `once failed retry --republish` end to end on real RabbitMQ: a poison message is recorded as
// failed; the operator fixes the cause and republishes it; the relay sends it through the outbox
// under its own message id; the consumer processes it afresh, once. A late redelivery of the
// original is then a duplicate, because both carry the same id.

let pool: pg.Pool;
let rabbit: Awaited<ReturnType<typeof amqpAdmin>>;
let db: ServiceDb;
let consumer: RabbitConsumer | undefined;
let publisher: RabbitPublisher | undefined;
let relay: Relay | undefined;
const exchange = uniqueName('republish');
const queue = `${exchange}-q`;

beforeAll(async () => {
  pool = createTestPool({ max: 6 });
  rabbit = await amqpAdmin();
  db = await serviceDb(pool, 'republish');
});
afterAll(async () => {
  await consumer?.stop();
  await relay?.stop();
  await publisher?.stop();
  const tiers = [1000, 10000, 60000].map((t) => `${queue}.retry.${t}ms`);
  await rabbit.deleteQueues([queue, `${queue}.dead`, `${queue}.quarantine`, ...tiers]);
  await rabbit.deleteExchanges([exchange, `${queue}.dlx`]);
  await rabbit.close();
  await dropServiceDbs(pool, [db]);
  await pool.end();
});

it('a failed message republished through the outbox runs afresh once, and the original is then a duplicate', {
  timeout: 60_000,
}, async () => {
  const url = serviceUrls().amqpUrl;
  let fixed = false;
  const seenHeaders: Record<string, string | undefined>[] = [];
  consumer = createRabbitConsumer({
    url,
    queue,
    pool,
    schema: db.schema,
    consumer: 'orders',
    handler: async (envelope, { tx }) => {
      seenHeaders.push({ ...envelope.headers });
      if (!fixed) throw new PermanentError('price service says no');
      await db.ledger.record(tx, { messageId: envelope.id ?? '', key: 'k', payload: 'ok' });
    },
  });
  let duplicates = 0;
  consumer.inbox.on('message:duplicate', () => duplicates++);
  await consumer.start();
  const setup = await rabbit.conn.createConfirmChannel();
  await setup.assertExchange(exchange, 'direct', { durable: true });
  await setup.bindQueue(queue, exchange, 'orders');
  const send = async () => {
    setup.publish(exchange, 'orders', Buffer.from('{"order":7}'), {
      messageId: 'order-7',
      persistent: true,
      headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
    });
    await setup.waitForConfirms();
  };
  await send();
  const status = async () =>
    (
      await pool.query<{ status: string }>(
        `SELECT status FROM ${quoteIdent(db.schema)}.inbox WHERE consumer = 'orders' AND message_id = 'order-7'`,
      )
    ).rows[0]?.status;
  await waitFor(
    'the poison message to be recorded failed',
    async () => (await status()) === 'failed',
    20_000,
  );

  // A RabbitMQ queue is not an exchange: without --to the CLI refuses and changes nothing.
  const at = (...args: string[]) => ['--schema', db.schema, ...args];
  const refused = await cli(at('failed', 'retry', 'orders', 'order-7', '--republish'));
  expect(refused.code).toBe(2);
  expect(refused.stderr).toContain('a queue is not an exchange: pass --to <exchange>');
  expect(refused.stderr).toContain('Nothing was changed');
  expect(await status()).toBe('failed');

  fixed = true;
  const r = await cli(at('--json', 'failed', 'retry', 'orders', 'order-7', '--republish', '--to', exchange));
  expect(r.code, r.stderr).toBe(0);
  // An exchange is not the queue it came from: marked a republish, which RabbitMQ, deduplicating
  // nothing, delivers as is (below, at once after the failure).
  expect(r.json()).toMatchObject({
    deleted: true,
    republished: { destination: exchange, key: 'orders', dedup: 'marked' },
  });
  expect(await status()).toBeUndefined();
  expect(await db.outboxCounts()).toMatchObject({ pending: 1 });

  publisher = createRabbitPublisher({ url });
  relay = createRelay({
    pool,
    schema: db.schema,
    publishers: { [exchange]: publisher },
    pollIntervalMs: 100,
  });
  await relay.start();
  await waitFor('the republished message to be processed', async () => (await status()) === 'done', 20_000);
  expect(await db.outboxCounts()).toMatchObject({ pending: 0, sent: 1 });
  // It arrived under its own id, with the original's own headers and none of the delivery's.
  const last = seenHeaders.at(-1) ?? {};
  expect(last.traceparent).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');

  // The original, delivered late (a producer retry): the same id, so a duplicate.
  await send();
  await waitFor('the late original to be dropped as a duplicate', () => duplicates === 1, 20_000);
  await setup.close();
  // Stopped here, not in afterAll: a relay still polling this schema would take the next test's
  // republished row (it has no publisher for that destination) before that test's own relay runs.
  await relay.stop();
  relay = undefined;
  const effects = await pool.query(
    `SELECT count(*)::int AS n FROM ${db.ledger.table} WHERE message_id = 'order-7'`,
  );
  expect(effects.rows[0].n).toBe(1);
});

it('stored jsonb is decoded: a header with a NUL is republished byte-identical, and list and inspect show the stored error as it was', async () => {
  // The inbox writes origin and error through core's jsonb codec; a NUL is stored tagged.
  const inbox = createInbox({
    pool,
    schema: db.schema,
    consumer: 'nul',
    handler: async () => {
      throw new PermanentError('no');
    },
  });
  await inbox.process({
    id: 'nul-1',
    body: Buffer.from('{}'),
    headers: {},
    key: 'k',
    source: { broker: 'kafka', queue: 'nul-topic', partition: 0, offset: '1' },
    attempt: 1,
    redelivered: false,
  });
  const origin = { broker: 'kafka', queue: 'nul-topic', key: 'k', headers: { 'x-bin': 'a\u0000b' } };
  const error = { name: 'PermanentError', message: 'bad \u0000 byte', code: 'PERMANENT' };
  await pool.query(
    `UPDATE ${quoteIdent(db.schema)}.inbox SET origin = $1::jsonb, error = $2::jsonb WHERE consumer = 'nul'`,
    [toJsonb(origin), toJsonb(error)],
  );
  const at = (...args: string[]) => ['--schema', db.schema, ...args];
  const list = await cli(at('--json', 'failed', 'list', '--consumer', 'nul'));
  expect(list.code, list.stderr).toBe(0);
  expect(list.json<{ failed: { error: unknown }[] }>().failed[0]?.error).toEqual(error);
  const inspect = await cli(at('--json', 'inspect', 'nul', 'nul-1'));
  expect(inspect.json()).toMatchObject({ error, origin });

  const r = await cli(at('--json', 'failed', 'retry', 'nul', 'nul-1', '--republish'));
  expect(r.code, r.stderr).toBe(0);
  const sent: OutboxMessage[] = [];
  await createRelay({
    pool,
    schema: db.schema,
    publishers: {
      'nul-topic': {
        async publish(messages) {
          sent.push(...messages);
        },
      },
    },
    listen: false,
  }).runOnce();
  expect(sent.map((m) => [m.id, m.key, m.headers])).toEqual([['nul-1', 'k', { 'x-bin': 'a\u0000b' }]]);
  const stored = await pool.query(
    `SELECT headers FROM ${quoteIdent(db.schema)}.outbox WHERE message_id = 'nul-1'`,
  );
  expect(fromJsonb(stored.rows[0].headers)).toEqual({ 'x-bin': 'a\u0000b' });
});

it("--to '' republishes to RabbitMQ's default exchange (outbox destination amq.default), straight to the queue the key names", {
  timeout: 60_000,
}, async () => {
  const url = serviceUrls().amqpUrl;
  const direct = `${exchange}-direct`;
  let fixed = false;
  const c = createRabbitConsumer({
    url,
    queue: direct,
    pool,
    schema: db.schema,
    consumer: 'direct',
    handler: async (envelope, { tx }) => {
      if (!fixed) throw new PermanentError('price service says no');
      await db.ledger.record(tx, { messageId: envelope.id ?? '', key: 'k', payload: 'ok' });
    },
  });
  const p = createRabbitPublisher({ url });
  let r2: Relay | undefined;
  try {
    await c.start();
    // Sent to the queue itself, through the default exchange, as most producers do.
    const ch = await rabbit.conn.createConfirmChannel();
    ch.sendToQueue(direct, Buffer.from('{"order":8}'), { messageId: 'order-8', persistent: true });
    await ch.waitForConfirms();
    await ch.close();
    const status = async () =>
      (
        await pool.query<{ status: string }>(
          `SELECT status FROM ${quoteIdent(db.schema)}.inbox WHERE consumer = 'direct' AND message_id = 'order-8'`,
        )
      ).rows[0]?.status;
    await waitFor(
      'the poison message to be recorded failed',
      async () => (await status()) === 'failed',
      20_000,
    );

    const at = (...args: string[]) => ['--schema', db.schema, ...args];
    // Without the key, '' names no queue: refused before anything changes.
    const noKey = await cli(at('failed', 'retry', 'direct', 'order-8', '--republish', '--to', ''));
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain("--to '' is RabbitMQ's default exchange: give --key <queue>");
    expect(await status()).toBe('failed');
    // The refusal without --to names the way to the queue itself.
    const noTo = await cli(at('failed', 'retry', 'direct', 'order-8', '--republish'));
    expect(noTo.stderr).toContain(`--to '' --key`);

    fixed = true;
    const r = await cli(
      at('--json', 'failed', 'retry', 'direct', 'order-8', '--republish', '--to', '', '--key', direct),
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toMatchObject({
      deleted: true,
      republished: { destination: 'amq.default', key: direct },
    });

    r2 = createRelay({ pool, schema: db.schema, publishers: { 'amq.default': p }, pollIntervalMs: 100 });
    await r2.start();
    await waitFor('the republished message to be processed', async () => (await status()) === 'done', 20_000);
    const effects = await pool.query(
      `SELECT count(*)::int AS n FROM ${db.ledger.table} WHERE message_id = 'order-8'`,
    );
    expect(effects.rows[0].n).toBe(1);
  } finally {
    await r2?.stop();
    await c.stop();
    await p.stop();
    const tiers = [1000, 10000, 60000].map((t) => `${direct}.retry.${t}ms`);
    await rabbit.deleteQueues([direct, `${direct}.dead`, ...tiers]);
    await rabbit.deleteExchanges([`${direct}.dlx`]);
  }
});
