import { createRelay, migrate, PermanentError, type Relay } from '@once/core';
import {
  createKafkaConsumer,
  createKafkaPublisher,
  type KafkaClient,
  type KafkaConsumer,
  type KafkaPublisher,
} from '@once/kafka';
import type { Admin, Kafka } from 'kafkajs';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cli } from '../../packages/cli/test/integration/fixtures/cli.js';
import {
  createLedger,
  createTestPool,
  createTopicsReady,
  dropSchema,
  freshSchemaName,
  kafkaClient,
  type Ledger,
  produce,
  quoteIdent,
  uniqueName,
  waitFor,
} from '../support/index.js';
import { onceKafka } from '../support/kafka-client.mjs';

// Pinned: Kafka does not deduplicate on once's id (its idempotent producer drops only a
// producer's own retries within a session), so `once failed retry --republish` right after the
// failure is delivered under the message's own id and runs once. RabbitMQ's is pinned by
// failed-republish.test.ts, SQS standard's by republish-sqs.test.ts.

let pool: pg.Pool;
let kafka: Kafka;
/** The client of the consumer and publisher under test (ONCE_KAFKA_CLIENT). */
let client: KafkaClient;
let admin: Admin;
let schema: string;
let ledger: Ledger;
let consumer: KafkaConsumer | undefined;
let publisher: KafkaPublisher | undefined;
let relay: Relay | undefined;
const topics: string[] = [];

beforeAll(async () => {
  pool = createTestPool({ max: 8 });
  schema = freshSchemaName('republish_kafka');
  await migrate(pool, { schema });
  ledger = await createLedger(pool, schema);
  kafka = kafkaClient('republish-kafka');
  client = await onceKafka('republish-kafka');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await relay?.stop();
  await consumer?.stop();
  await publisher?.stop();
  await admin.deleteTopics({ topics }).catch(() => {});
  await admin.disconnect();
  await dropSchema(pool, schema);
  await pool.end();
});

it('a failed message republished at once is delivered under its own id and runs once', {
  timeout: 120_000,
}, async () => {
  const topic = uniqueName('republish-kafka');
  topics.push(topic);
  await createTopicsReady(admin, { [topic]: 1 });
  let fixed = false;
  consumer = createKafkaConsumer({
    kafka: client,
    groupId: uniqueName('republish-kafka-g'),
    consumer: 'orders',
    topics: [topic],
    pool,
    schema,
    fromBeginning: true,
    deadLetterTopic: false,
    maxAttempts: 1,
    logger: false,
    handler: async (envelope, { tx, id }) => {
      if (!fixed) throw new PermanentError('price service says no');
      await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: 'ok' });
    },
  });
  await consumer.start();
  await produce(kafka, topic, [{ key: 'k', value: '{"order":5}', headers: { 'message-id': 'order-5' } }]);
  const status = async () =>
    (
      await pool.query<{ status: string }>(
        `SELECT status FROM ${quoteIdent(schema)}.inbox WHERE consumer = 'orders' AND message_id = 'order-5'`,
      )
    ).rows[0]?.status;
  await waitFor('the failure recorded', async () => (await status()) === 'failed', 60_000);

  fixed = true;
  const r = await cli(['--schema', schema, '--json', 'failed', 'retry', 'orders', 'order-5', '--republish']);
  expect(r.code, r.stderr).toBe(0);
  expect(r.json()).toMatchObject({ republished: { destination: topic, key: 'k', dedup: 'none' } });
  publisher = createKafkaPublisher({ kafka: client });
  relay = createRelay({ pool, schema, publishers: { [topic]: publisher }, pollIntervalMs: 200 });
  await relay.start();
  await waitFor('the republished message processed', async () => (await status()) === 'done', 60_000);
  expect((await ledger.effects()).map((e) => e.messageId)).toEqual(['order-5']);
});
