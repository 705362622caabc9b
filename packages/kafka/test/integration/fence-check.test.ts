import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  fetchOffsetsReady,
  freshDb,
  kafkaClient,
  type Ledger,
  message,
  produce,
  type TestDb,
  uniqueName,
  waitFor,
  waitForCommitted,
} from '../../../../test/support/index.js';
import { createKafkaConsumer, type KafkaConsumer, KafkaErrorCode } from '../../src/index.js';

const KAFKA_FENCE_MISMATCH = KafkaErrorCode.FenceMismatch;

// Offset fencing takes every offset below a partition's fence for a duplicate. Offsets are
// positions, not identities: a deleted and recreated topic numbers them from 0 again, and the old
// fence would have the new messages acked without running. The fence records the id of the
// message it last moved past; before anything below it is acked, the consumer checks the log.

let db: TestDb;
let kafka: Kafka;
let admin: Admin;
const consumers: KafkaConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_fence_check', 6);
  kafka = kafkaClient('once-fence-check');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await admin.disconnect();
  await db.close();
});

function fencedConsumer(topic: string, groupId: string, ledger: Ledger): KafkaConsumer {
  const c = createKafkaConsumer({
    kafka,
    groupId,
    topics: [topic],
    pool: db.pool,
    schema: db.schema,
    offsetFencing: true,
    fromBeginning: true,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    handler: async (envelope, { tx, id }) => {
      await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: '' });
    },
  });
  consumers.push(c);
  return c;
}

/** Deletes a topic and creates it again under the same name (deletion completes in the background). */
async function recreate(topic: string): Promise<void> {
  await admin.deleteTopics({ topics: [topic], timeout: 30_000 });
  await waitFor(`${topic} to be deleted`, async () => !(await admin.listTopics()).includes(topic));
  await waitFor(
    `${topic} to be created again`,
    async () => {
      try {
        await createTopicsReady(admin, { [topic]: 1 });
        return true;
      } catch {
        return false; // still marked for deletion
      }
    },
    60_000,
  );
}

/** Committed offset of partition 0 ('-1' when none). */
async function committed(groupId: string, topic: string): Promise<string | undefined> {
  const [t] = await fetchOffsetsReady(admin, { groupId, topics: [topic] });
  return t?.partitions.find((p) => p.partition === 0)?.offset;
}

/** Runs a fenced consumer until it stops the partition or commits to the end of the log. */
async function runAfterRecreate(topic: string, groupId: string, ledger: Ledger, end: string) {
  const consumer = fencedConsumer(topic, groupId, ledger);
  const errors: string[] = [];
  consumer.on('error', (e) => errors.push(e.error.code ?? e.where));
  let duplicates = 0;
  consumer.inbox.on('message:duplicate', () => duplicates++);
  await consumer.start();
  await waitFor(
    'the partition to stop, or its offsets to be committed',
    async () => consumer.health().stopped.length > 0 || (await committed(groupId, topic)) === end,
  );
  return { consumer, errors, duplicates: () => duplicates };
}

it('a recreated topic shorter than the fence: the partition stops, nothing is acked', async () => {
  const topic = uniqueName('fence-short');
  const groupId = uniqueName('g-fence-short');
  await createTopicsReady(admin, { [topic]: 1 });
  const ledger = await db.ledger('short');
  const old = Array.from({ length: 5 }, (_, i) => `${topic}-old-${i}`);
  await produce(
    kafka,
    topic,
    old.map((id) => message(id, 'k')),
  );
  const first = fencedConsumer(topic, groupId, ledger);
  await first.start();
  await waitForCommitted(admin, groupId, topic);
  await first.stop();

  // The same log, read again by a new consumer: the fence holds, the new messages run.
  const more = [`${topic}-old-5`, `${topic}-old-6`];
  await produce(
    kafka,
    topic,
    more.map((id) => message(id, 'k')),
  );
  const second = fencedConsumer(topic, groupId, ledger);
  await second.start();
  await waitForCommitted(admin, groupId, topic);
  expect(second.health()).toMatchObject({ healthy: true, stopped: [] });
  await second.stop();
  expect((await ledger.check({ expectedIds: [...old, ...more], checkOrderPerKey: true })).ok).toBe(true);

  await recreate(topic);
  const fresh = Array.from({ length: 3 }, (_, i) => `${topic}-new-${i}`);
  await produce(
    kafka,
    topic,
    fresh.map((id) => message(id, 'k')),
  );
  const run = await runAfterRecreate(topic, groupId, ledger, '3');
  expect(run.duplicates()).toBe(0);
  expect(run.consumer.health()).toMatchObject({ healthy: false, stopped: [`${topic}/0`] });
  const lastError = run.consumer.health().lastError;
  expect(lastError?.code).toBe(KAFKA_FENCE_MISMATCH);
  expect(lastError?.message).toContain(`topic ${topic} partition 0: the offset fence is at 7`);
  expect(lastError?.message).toContain('high watermark at 3');
  expect(run.errors).toContain(KAFKA_FENCE_MISMATCH);
  // Nothing of the new topic was acknowledged or run: no committed offset, no effects.
  expect(await committed(groupId, topic)).toBe('-1');
  const verdict = await ledger.check({ expectedIds: [...old, ...more, ...fresh] });
  expect(verdict.lost).toEqual(fresh);
  await run.consumer.stop();
});

it('a recreated topic longer than the fence: another message at the fence, the partition stops', async () => {
  const topic = uniqueName('fence-long');
  const groupId = uniqueName('g-fence-long');
  await createTopicsReady(admin, { [topic]: 1 });
  const ledger = await db.ledger('long');
  const old = Array.from({ length: 3 }, (_, i) => `${topic}-old-${i}`);
  await produce(
    kafka,
    topic,
    old.map((id) => message(id, 'k')),
  );
  const first = fencedConsumer(topic, groupId, ledger);
  await first.start();
  await waitForCommitted(admin, groupId, topic);
  await first.stop();

  await recreate(topic);
  const fresh = Array.from({ length: 6 }, (_, i) => `${topic}-new-${i}`);
  await produce(
    kafka,
    topic,
    fresh.map((id) => message(id, 'k')),
  );
  const run = await runAfterRecreate(topic, groupId, ledger, '6');
  expect(run.consumer.health().stopped).toEqual([`${topic}/0`]);
  const lastError = run.consumer.health().lastError;
  expect(lastError?.code).toBe(KAFKA_FENCE_MISMATCH);
  expect(lastError?.message).toContain(`the message at offset 2 is id "${topic}-new-2"`);
  expect(lastError?.message).toContain(`the fence last moved past id "${topic}-old-2"`);
  expect(run.duplicates()).toBe(0);
  expect(await committed(groupId, topic)).toBe('-1');
  const verdict = await ledger.check({ expectedIds: [...old, ...fresh] });
  expect(verdict.lost).toEqual(fresh);
  await run.consumer.stop();
});
