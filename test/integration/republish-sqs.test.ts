import { DeleteMessageCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { createRelay, migrate, PermanentError, type Relay } from '@once/core';
import { createSqsConsumer, createSqsPublisher, type SqsConsumer, type SqsConsumerOptions } from '@once/sqs';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cli } from '../../packages/cli/test/integration/fixtures/cli.js';
import {
  createLedger,
  createTestPool,
  dropSchema,
  freshSchemaName,
  type Ledger,
  quoteIdent,
  uniqueName,
  waitFor,
} from '../support/index.js';
import { sqsClient, sqsQueues } from './fixtures/outbox-env.js';

// `once failed retry --republish` of a message that came from SQS. A FIFO queue drops a second
// send of a MessageDeduplicationId for five minutes after the first, and answers it with success
// (SQS does; ElasticMQ too, since 1.0, even once the first was deleted: checked by the first test
// here before anything counts on it). Before schema version 10 the republish went under the
// original's deduplication id and vanished. Now:
// - a consumer that reads the `message-id` attribute (the default) gets it under a fresh
//   deduplication id, its id unchanged, and runs it once;
// - a consumer that takes ids from the deduplication id would see a fresh one as a new message:
//   the republish is refused until five minutes after the failure, naming the time, and then goes
//   under its own;
// - a standard queue deduplicates nothing: a republish is delivered as before (pinned).

const client = sqsClient();
const queues = sqsQueues(client);
let pool: pg.Pool;
let schema: string;
let ledger: Ledger;
const consumers: SqsConsumer[] = [];
const relays: Relay[] = [];

beforeAll(async () => {
  pool = createTestPool({ max: 10 });
  schema = freshSchemaName('republish_sqs');
  await migrate(pool, { schema });
  ledger = await createLedger(pool, schema);
});
afterAll(async () => {
  for (const r of relays) await r.stop();
  for (const c of consumers) await c.stop();
  await queues.drop();
  client.destroy();
  await dropSchema(pool, schema);
  await pool.end();
});

const status = async (consumer: string, id: string) =>
  (
    await pool.query<{ status: string }>(
      `SELECT status FROM ${quoteIdent(schema)}.inbox WHERE consumer = $1 AND message_id = $2`,
      [consumer, id],
    )
  ).rows[0]?.status;

/** A consumer that fails permanently until `fixed()` says otherwise, then records one effect. */
async function failingConsumer(
  queueUrl: string,
  consumer: string,
  fixed: () => boolean,
  more: Partial<SqsConsumerOptions> = {},
): Promise<SqsConsumer> {
  const c = createSqsConsumer({
    client,
    queueUrl,
    pool,
    schema,
    consumer,
    deadLetterQueueUrl: false,
    maxAttempts: 1,
    waitTimeSeconds: 1,
    logger: false,
    handler: async (envelope, { tx, id }) => {
      if (!fixed()) throw new PermanentError('price service says no');
      await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: consumer });
    },
    ...more,
  } as SqsConsumerOptions);
  consumers.push(c);
  await c.start();
  return c;
}

async function send(queueUrl: string, id: string, fifo: boolean): Promise<void> {
  await client.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: JSON.stringify({ order: id }),
      MessageAttributes: { 'message-id': { DataType: 'String', StringValue: id } },
      ...(fifo ? { MessageGroupId: 'g', MessageDeduplicationId: id } : {}),
    }),
  );
}

async function relayTo(queueUrl: string): Promise<Relay> {
  const relay = createRelay({
    pool,
    schema,
    publishers: { [queueUrl]: createSqsPublisher({ client }) },
    pollIntervalMs: 200,
  });
  relays.push(relay);
  await relay.start();
  return relay;
}

const effectsOf = async (id: string) => (await ledger.effects()).filter((e) => e.messageId === id).length;

it('ElasticMQ drops a FIFO send under a deduplication id it took minutes ago, even after that message was deleted', async () => {
  const url = await queues.create(`${uniqueName('republish-probe')}.fifo`);
  const receive = async () => {
    const res = await client.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    for (const m of res.Messages ?? [])
      await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }));
    return (res.Messages ?? []).map((m) => JSON.parse(m.Body ?? '{}').order as string);
  };
  await send(url, 'probe-1', true);
  expect(await receive()).toEqual(['probe-1']);
  await send(url, 'probe-1', true);
  await send(url, 'probe-2', true);
  const later: string[] = [];
  await waitFor(
    'the next message',
    async () => {
      later.push(...(await receive()));
      return later.includes('probe-2');
    },
    20_000,
  );
  expect(later).toEqual(['probe-2']);
});

it('FIFO, consumer reading message-id: republished with a fresh deduplication id inside the five minutes, it runs once under its own id', {
  timeout: 90_000,
}, async () => {
  const url = await queues.create(`${uniqueName('republish-fifo')}.fifo`);
  let fixed = false;
  await failingConsumer(url, 'orders', () => fixed);
  await send(url, 'order-7', true);
  await waitFor('the failure recorded', async () => (await status('orders', 'order-7')) === 'failed', 30_000);

  fixed = true;
  const r = await cli(['--schema', schema, '--json', 'failed', 'retry', 'orders', 'order-7', '--republish']);
  expect(r.code, r.stderr).toBe(0);
  expect(r.json()).toMatchObject({
    deleted: true,
    republished: { destination: url, key: 'g', dedup: 'fresh-deduplication-id' },
  });
  const relay = await relayTo(url);
  await waitFor(
    'the republished message processed',
    async () => (await status('orders', 'order-7')) === 'done',
    30_000,
  );
  // A relay left polling this schema would take the next test's row, with no publisher for it.
  await relay.stop();
  const row = await pool.query(
    `SELECT status, republish_dedup_id FROM ${quoteIdent(schema)}.outbox WHERE message_id = 'order-7'`,
  );
  expect(row.rows[0].status).toBe('sent');
  expect(row.rows[0].republish_dedup_id).not.toBe('order-7');
  expect(await effectsOf('order-7')).toBe(1);
});

it('FIFO, consumer taking ids from the deduplication id: refused until five minutes after the failure, naming the time; then under its own id', {
  timeout: 90_000,
}, async () => {
  const url = await queues.create(`${uniqueName('republish-dedup')}.fifo`);
  await failingConsumer(url, 'by-dedup', () => false, { idFrom: 'deduplication-id' });
  await send(url, 'order-9', true);
  await waitFor(
    'the failure recorded',
    async () => (await status('by-dedup', 'order-9')) === 'failed',
    30_000,
  );
  const { rows } = await pool.query<{ earliest: Date }>(
    `SELECT created_at + interval '5 minutes' AS earliest FROM ${quoteIdent(schema)}.inbox
     WHERE consumer = 'by-dedup' AND message_id = 'order-9'`,
  );
  const earliest = rows[0]!.earliest.toISOString();

  const refused = await cli(['--schema', schema, 'failed', 'retry', 'by-dedup', 'order-9', '--republish']);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toContain('MessageDeduplicationId');
  expect(refused.stderr).toContain(`try again at ${earliest} or later`);
  expect(refused.stderr).toContain('Nothing was changed');
  const json = await cli([
    '--schema',
    schema,
    '--json',
    'failed',
    'retry',
    'by-dedup',
    'order-9',
    '--republish',
  ]);
  expect(json.code).toBe(2);
  expect(json.errorJson().error.code).toBe('INSIDE_DEDUP_WINDOW');
  expect(await status('by-dedup', 'order-9')).toBe('failed');
  const none = await pool.query(
    `SELECT count(*)::int AS n FROM ${quoteIdent(schema)}.outbox WHERE message_id = 'order-9'`,
  );
  expect(none.rows[0].n).toBe(0);

  // Five minutes later (the failure's time moved back instead of waiting): under its own id.
  await pool.query(
    `UPDATE ${quoteIdent(schema)}.inbox SET created_at = created_at - interval '5 minutes'
     WHERE consumer = 'by-dedup' AND message_id = 'order-9'`,
  );
  const later = await cli([
    '--schema',
    schema,
    '--json',
    'failed',
    'retry',
    'by-dedup',
    'order-9',
    '--republish',
  ]);
  expect(later.code, later.stderr).toBe(0);
  expect(later.json()).toMatchObject({ republished: { destination: url, dedup: 'window-passed' } });
  const row = await pool.query(
    `SELECT republish_dedup_id FROM ${quoteIdent(schema)}.outbox WHERE message_id = 'order-9'`,
  );
  // Not relayed here: ElasticMQ's five minutes from the original's send have not really passed.
  expect(row.rows).toEqual([{ republish_dedup_id: 'order-9' }]);
});

it('standard queue (pinned): a republish right after the failure is delivered and runs once', {
  timeout: 90_000,
}, async () => {
  const url = await queues.create(uniqueName('republish-std'));
  let fixed = false;
  await failingConsumer(url, 'std', () => fixed);
  await send(url, 'order-11', false);
  await waitFor('the failure recorded', async () => (await status('std', 'order-11')) === 'failed', 30_000);
  fixed = true;
  const r = await cli(['--schema', schema, '--json', 'failed', 'retry', 'std', 'order-11', '--republish']);
  expect(r.code, r.stderr).toBe(0);
  expect(r.json()).toMatchObject({ republished: { destination: url, dedup: 'none' } });
  const relay = await relayTo(url);
  await waitFor(
    'the republished message processed',
    async () => (await status('std', 'order-11')) === 'done',
    30_000,
  );
  await relay.stop();
  expect(await effectsOf('order-11')).toBe(1);
});
