import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  freshDb,
  kafkaClient,
  message,
  produce,
  type TestDb,
  uniqueName,
} from '../../../../test/support/index.js';
import { kafkaClientName } from '../../../../test/support/kafka-client.mjs';
import { createKafkaConsumer, type KafkaClient } from '../../src/index.js';
import { clientUnderTest } from './fixtures/client-under-test.js';

// Message mode (batch: false) runs a slice one message per transaction and stops at a retry. When
// the retry delay is longer than inlineRetryMaxMs the partition pauses and seeks back: the rest of
// the slice never reached the handler and is read again after the pause. The inbox reports each
// of them `not-run` (`behind`), as it does the rest of a stopped batch in batch mode. (A delay
// waited out in place reports nothing: the rest runs after the retry, see retry-in-place.test.ts.)

// Confluent's consumer hands out a batch of one message first and grows its batches while they are
// handled quickly: unbounded batches (`js.consumer.max.batch.size: -1`) put the three messages in
// one slice there too, which is this test's premise.
const consumerConfig = kafkaClientName() === 'confluent' ? { 'js.consumer.max.batch.size': -1 } : undefined;

let db: TestDb;
let kafka: Kafka;
/** The client of the consumers and publishers under test (ONCE_KAFKA_CLIENT). */
let client: KafkaClient;
let admin: Admin;

beforeAll(async () => {
  db = await freshDb('kafka_not_run', 4);
  kafka = kafkaClient('once-not-run');
  client = await clientUnderTest('once-not-run');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await admin.disconnect();
  await db.close();
});

it('message mode: the rest of a slice behind a retry that pauses the partition is reported not run, then runs once', {
  timeout: 60_000,
}, async () => {
  const topic = uniqueName('not-run');
  await createTopicsReady(admin, { [topic]: 1 });
  const ids = [1, 2, 3].map((n) => `${topic}-${n}`);
  await produce(
    kafka,
    topic,
    ids.map((id) => message(id, 'k')),
  );
  const runs = new Map<string, number>();
  const consumer = createKafkaConsumer({
    kafka: client,
    groupId: uniqueName('g-not-run'),
    topics: [topic],
    pool: db.pool,
    schema: db.schema,
    fromBeginning: true,
    batch: false,
    crashReplay: false,
    ...(consumerConfig && { consumerConfig }),
    deadLetterTopic: false,
    logger: false,
    retryDelayMs: () => 10,
    inlineRetryMaxMs: 0,
    handler: async (_envelope, { id }) => {
      const n = (runs.get(id) ?? 0) + 1;
      runs.set(id, n);
      if (id === ids[0] && n === 1) throw new Error('transient once');
    },
  });
  const notRun: string[] = [];
  const processed: string[] = [];
  consumer.inbox.on('message:not-run', (e) => notRun.push(`${e.id}: ${e.why}`));
  consumer.inbox.on('message:processed', (e) => processed.push(e.id));
  await consumer.start();
  try {
    const deadline = Date.now() + 45_000;
    while (processed.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  } finally {
    await consumer.stop();
  }
  expect(processed).toEqual(ids);
  expect(notRun).toEqual([`${ids[1]}: behind`, `${ids[2]}: behind`]);
  expect([...runs.values()]).toEqual([2, 1, 1]);
});
