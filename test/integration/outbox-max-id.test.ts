import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { createInbox, createRelay, type Envelope, PermanentError } from '@once/core';
import { MAX_ID_LENGTH } from '@once/core/admin';
import { createKafkaPublisher } from '@once/kafka';
import { createRabbitPublisher } from '@once/rabbitmq';
import { createSqsPublisher } from '@once/sqs';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cli } from '../../packages/cli/test/integration/fixtures/cli.js';
import { envelopeOf } from '../../packages/sqs/src/envelope-of.js';
import {
  createTopicsReady,
  kafkaClient,
  quoteIdent,
  readTopic,
  serviceUrls,
  uniqueName,
} from '../support/index.js';
import { onceKafka } from '../support/kafka-client.mjs';
import {
  amqpAdmin,
  createTestPool,
  dropServiceDbs,
  type ServiceDb,
  serviceDb,
  sqsClient,
  sqsQueues,
} from './fixtures/outbox-env.js';

// A message id of the maximum size once accepts (MAX_ID_LENGTH characters) failed, and an
// operator sends it back with `once failed retry --republish`: through the outbox and a relay to
// each broker. Kafka (a header) and SQS (a String attribute; the FIFO deduplication id is its
// hash) carry it whole. AMQP's message-id holds 255 bytes at most: the RabbitMQ publisher refuses
// it with a named error, not retryable, and the relay parks the row on its first attempt instead
// of retrying it forever. The CLI cannot refuse up front: an outbox destination is only a name,
// and which broker it goes to is known to the relay's configuration alone.

let pool: pg.Pool;
let db: ServiceDb;
const run = uniqueName('maxid');
const kafka = kafkaClient(run);
const sqs = sqsClient();
const queues = sqsQueues(sqs);
let rabbit: Awaited<ReturnType<typeof amqpAdmin>>;
const exchange = `${run}-x`;
const rabbitQueue = `${run}-q`;
const topic = `${run}-t`;
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  pool = createTestPool({ max: 6 });
  db = await serviceDb(pool, 'maxid');
  rabbit = await amqpAdmin();
});
afterAll(async () => {
  for (const stop of stops) await stop().catch(() => {});
  await rabbit.deleteQueues([rabbitQueue]);
  await rabbit.deleteExchanges([exchange]);
  await rabbit.close();
  await queues.drop();
  const admin = kafka.admin();
  await admin.connect();
  await admin.deleteTopics({ topics: [topic] }).catch(() => {});
  await admin.disconnect();
  sqs.destroy();
  await dropServiceDbs(pool, [db]);
  await pool.end();
});

/** The id: MAX_ID_LENGTH characters, some of them beyond ASCII (so more bytes than characters). */
function maxId(tag: string): string {
  return `${run}-${tag}-é${'x'.repeat(MAX_ID_LENGTH)}`.slice(0, MAX_ID_LENGTH);
}

/** Records `id` as failed for consumer `consumer`, as an adapter's inbox would. */
async function failed(consumer: string, id: string, source: Envelope['source']): Promise<void> {
  const inbox = createInbox({
    pool,
    schema: db.schema,
    consumer,
    handler: async () => {
      throw new PermanentError('rejected');
    },
  });
  const outcome = await inbox.process({
    id,
    body: Buffer.from(`{"id":"${consumer}"}`),
    headers: { 'x-tenant': 't1' },
    key: 'k1',
    source,
    attempt: 1,
    redelivered: false,
  });
  expect(outcome.status).toBe('failed');
}

const at = (...args: string[]) => ['--schema', db.schema, ...args];

it(`a ${MAX_ID_LENGTH}-character id republished to Kafka and SQS arrives whole; RabbitMQ refuses it and the row is parked at once`, {
  timeout: 120_000,
}, async () => {
  const kafkaId = maxId('kafka');
  const sqsId = maxId('sqs');
  const rabbitId = maxId('rabbit');
  expect([kafkaId, sqsId, rabbitId].map((i) => i.length)).toEqual(Array(3).fill(MAX_ID_LENGTH));
  expect(Buffer.byteLength(rabbitId)).toBeGreaterThan(255);

  const admin = kafka.admin();
  await admin.connect();
  await createTopicsReady(admin, { [topic]: 1 });
  await admin.disconnect();
  const queueUrl = await queues.create(`${run}-q.fifo`);
  const setup = await rabbit.conn.createChannel();
  await setup.assertQueue(rabbitQueue, { durable: true });
  await setup.assertExchange(exchange, 'direct', { durable: true });
  await setup.bindQueue(rabbitQueue, exchange, 'k1');
  await setup.close();

  await failed('from-kafka', kafkaId, { broker: 'kafka', queue: topic, partition: 0, offset: '1' });
  // As the SQS consumer records it (schema version 10): it reads ids from message-id, so the
  // republish may go with a deduplication id of its own (a consumer of the deduplication id would
  // have to wait five minutes).
  await failed('from-sqs', sqsId, { broker: 'sqs', queue: queueUrl, group: 'k1', idFrom: 'header' });
  await failed('from-rabbit', rabbitId, { broker: 'rabbitmq', queue: rabbitQueue });
  // Kafka and SQS: back where they came from; RabbitMQ: to an exchange (--to is required there).
  for (const [consumer, id, extra] of [
    ['from-kafka', kafkaId, []],
    ['from-sqs', sqsId, []],
    ['from-rabbit', rabbitId, ['--to', exchange]],
  ] as const) {
    const r = await cli(at('--json', 'failed', 'retry', consumer, id, '--republish', ...extra));
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toMatchObject({ deleted: true, republished: { key: 'k1' } });
  }
  expect(await db.outboxCounts()).toMatchObject({ pending: 3 });

  // The publisher under test on the run's client library (ONCE_KAFKA_CLIENT).
  const kafkaPublisher = createKafkaPublisher({ kafka: await onceKafka(run) });
  const rabbitPublisher = createRabbitPublisher({ url: serviceUrls().amqpUrl });
  stops.push(
    () => kafkaPublisher.stop(),
    () => rabbitPublisher.stop(),
  );
  const parked: { id: string; code: string | undefined }[] = [];
  const relay = createRelay({
    pool,
    schema: db.schema,
    publishers: {
      [topic]: kafkaPublisher,
      [queueUrl]: createSqsPublisher({ client: sqs }),
      [exchange]: rabbitPublisher,
    },
    listen: false,
  });
  relay.on('outbox:parked', (e) => parked.push({ id: e.id, code: e.error.code }));
  expect(await relay.runOnce()).toBe(3);

  const rows = (
    await pool.query<{ id: string; status: string; attempts: number; last_error: { code?: string } | null }>(
      `SELECT coalesce(message_id, id::text) AS id, status, attempts, last_error FROM ${quoteIdent(db.schema)}.outbox`,
    )
  ).rows;
  const byId = new Map(rows.map((r) => [r.id, r]));
  expect(byId.get(kafkaId)).toMatchObject({ status: 'sent', attempts: 1 });
  expect(byId.get(sqsId)).toMatchObject({ status: 'sent', attempts: 1 });
  expect(byId.get(rabbitId)).toMatchObject({
    status: 'failed',
    attempts: 1,
    last_error: { code: 'AMQP_ID_TOO_LONG', message: expect.stringContaining('at most 255 bytes') },
  });
  expect(parked).toEqual([{ id: rabbitId, code: 'AMQP_ID_TOO_LONG' }]);
  const status = await cli(at('--json', 'outbox', 'status'));
  expect(JSON.stringify(status.json())).toContain('"failed":1');

  const [fromKafka] = await readTopic(kafka, topic, 1);
  expect(fromKafka?.headers?.['message-id']?.toString()).toBe(kafkaId);
  expect(fromKafka?.headers?.['x-tenant']?.toString()).toBe('t1');
  const received = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 5,
      MessageAttributeNames: ['All'],
      MessageSystemAttributeNames: ['All'],
    }),
  );
  expect(received.Messages).toHaveLength(1);
  const envelope = envelopeOf(received.Messages![0]!, {
    queueUrl,
    idFrom: 'header',
    idHeader: 'message-id',
  });
  expect(envelope.id).toBe(sqsId);
  expect(envelope.key).toBe('k1');
  expect(await rabbit.count(rabbitQueue)).toBe(0);
});
