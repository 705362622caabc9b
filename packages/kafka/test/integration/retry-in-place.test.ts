import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTopicsReady,
  fetchOffsetsReady,
  freshDb,
  header,
  kafkaClient,
  message,
  produce,
  readTopic,
  type TestDb,
  uniqueName,
  waitForCommitted,
} from '../../../../test/support/index.js';
import { createKafkaConsumer, type KafkaClient, type KafkaConsumer } from '../../src/index.js';
import { decodeMarker } from '../../src/replay-marker.js';
import { clientUnderTest } from './fixtures/client-under-test.js';

// Message mode (batch: false) with a retry delay short enough to wait out in place
// (inlineRetryMaxMs): a transient failure costs one more run of that message and nothing else.
// The messages after it in its slice wait behind it and then run once each: none is run or
// reported `not-run` again, whatever the slice size, so the work done stays proportional to the
// messages plus the failures. Order within the partition, one effect per id, the offset committed
// to the end and the dead letter of a message that fails every time all hold as before.

let db: TestDb;
let kafka: Kafka;
/** The client of the consumers and publishers under test (ONCE_KAFKA_CLIENT). */
let client: KafkaClient;
let admin: Admin;
const consumers: KafkaConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_retry_in_place', 6);
  kafka = kafkaClient('once-retry-in-place');
  client = await clientUnderTest('once-retry-in-place');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await admin.disconnect();
  await db.close();
});

interface Case {
  name: string;
  n: number;
  /** Indexes that fail once (transiently), then succeed. */
  failOnce: number[];
  /** An index that fails every time: dead-lettered after maxAttempts runs. */
  poison?: number;
  retryDelayMs?: (attempt: number) => number;
}

const cases: Case[] = [
  {
    name: 'retry delay 0 (as the bench), slices of 100, a poison message',
    n: 300,
    failOnce: [3, 10, 11, 99, 100, 150, 299],
    poison: 40,
    retryDelayMs: () => 0,
  },
  { name: 'the default retry delay (1 s, waited in place)', n: 120, failOnce: [5, 70] },
];

describe.each(cases)('message mode, one partition: $name', ({ n, failOnce, poison, retryDelayMs }) => {
  it(`${n} messages, ${failOnce.length} failing once: each runs once more, nothing else runs or is reported again`, {
    timeout: 90_000,
  }, async () => {
    const maxAttempts = 3;
    const topic = uniqueName('retry-in-place');
    await createTopicsReady(admin, { [topic]: 1, [`${topic}.dlq`]: 1 });
    const ids = Array.from({ length: n }, (_, k) => `${topic}-${k}`);
    await produce(
      kafka,
      topic,
      ids.map((id) => message(id, 'one-key')),
    );
    const failing = new Set(failOnce.map((k) => ids[k]!));
    const poisonId = poison === undefined ? undefined : ids[poison]!;
    const ledger = await db.ledger('once');
    const runs = new Map<string, number>();
    const groupId = uniqueName('g-retry-in-place');
    const consumer = createKafkaConsumer({
      kafka: client,
      groupId,
      topics: [topic],
      pool: db.pool,
      schema: db.schema,
      fromBeginning: true,
      batch: false,
      batchSize: 100,
      maxAttempts,
      ...(retryDelayMs ? { retryDelayMs } : {}),
      logger: false,
      handler: async (envelope, { tx, id }) => {
        const k = (runs.get(id) ?? 0) + 1;
        runs.set(id, k);
        // The effect first, then the failure: it must be rolled back with the claim.
        await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: String(k) });
        if (id === poisonId || (failing.has(id) && k === 1)) throw new Error(`transient, run ${k}`);
      },
    });
    consumers.push(consumer);
    const seen = { notRun: 0, busy: 0, retry: 0, partitionRetry: 0 };
    const processed: string[] = [];
    consumer.inbox.on('message:not-run', () => seen.notRun++);
    consumer.inbox.on('message:busy', () => seen.busy++);
    consumer.inbox.on('message:retry', () => seen.retry++);
    consumer.on('partition:retry', () => seen.partitionRetry++);
    consumer.inbox.on('message:processed', (e) => processed.push(e.id));
    const deadLettered: string[] = [];
    consumer.on('message:dead-lettered', (e) => deadLettered.push(e.id ?? '?'));
    await consumer.start();
    await waitForCommitted(admin, groupId, topic);
    await consumer.stop();

    const extra = poisonId === undefined ? 0 : maxAttempts - 1;
    // Every message ran once, a message failing once twice, the poison maxAttempts times: no more.
    const total = [...runs.values()].reduce((a, b) => a + b, 0);
    expect(total).toBe(n + failOnce.length + extra);
    for (const id of ids) {
      const want = id === poisonId ? maxAttempts : failing.has(id) ? 2 : 1;
      expect({ id, runs: runs.get(id) }).toEqual({ id, runs: want });
    }
    expect(seen).toEqual({
      notRun: 0,
      busy: 0,
      retry: failOnce.length + extra,
      partitionRetry: failOnce.length + extra,
    });
    // In offset order, each once; one effect per id; the poison's effects all rolled back.
    const expected = ids.filter((id) => id !== poisonId);
    expect(processed).toEqual(expected);
    const verdict = await ledger.check({ expectedIds: expected, checkOrderPerKey: true });
    expect(verdict).toMatchObject({ lost: [], duplicated: [], unexpected: [], orderViolations: [] });
    expect(verdict.total).toBe(expected.length);
    // Committed to the end (waitForCommitted), and no replay marker left behind.
    const [t] = await fetchOffsetsReady(admin, { groupId, topics: [topic] });
    expect(t!.partitions[0]!.offset).toBe(String(n));
    expect(decodeMarker(t!.partitions[0]!.metadata)).toBeUndefined();
    if (poisonId !== undefined) {
      expect(deadLettered).toEqual([poisonId]);
      const dlq = await readTopic(kafka, `${topic}.dlq`, 1);
      expect(dlq.map((m) => header(m, 'message-id'))).toEqual([poisonId]);
    } else {
      expect(deadLettered).toEqual([]);
    }
    expect(consumer.health().lastError).toBeUndefined();
  });
});
