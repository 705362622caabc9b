import { type Admin, type Kafka, Partitioners } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTopicsReady,
  fetchOffsetsReady,
  header,
  kafkaClient,
  readTopic,
  uniqueName,
  waitFor,
} from '../../../../test/support/index.js';
import { testBrokers } from '../../../../test/support/kafka-client.mjs';
import { confluent } from '../../src/confluent.js';
import { createKafkaPublisher, type KafkaClient } from '../../src/index.js';
import { decodeMarker, encodeMarker } from '../../src/replay-marker.js';

// The Confluent client's producing side and offset metadata, against the real broker: keyed
// messages land where kafkajs' DefaultPartitioner (Java's murmur2) puts them, and the replay
// marker committed through a batch reads back through the client's admin exactly (librdkafka
// leaves a trailing NUL on it, which the client strips), so `commitMetadata` is true.

interface ConfluentLib {
  KafkaJS: {
    Kafka: new (config: Record<string, unknown>) => Parameters<typeof confluent>[0];
    logLevel: { NOTHING: number };
  };
}

/** Through a variable, so that a clone without the addon still type-checks (the types come with it). */
const CONFLUENT: string = '@confluentinc/kafka-javascript';
let lib: ConfluentLib;
let kafka: Kafka;
let admin: Admin;
let client: KafkaClient;

beforeAll(async () => {
  lib = (await import(CONFLUENT)) as ConfluentLib;
  kafka = kafkaClient('once-confluent-client');
  admin = kafka.admin();
  await admin.connect();
  client = confluent(
    new lib.KafkaJS.Kafka({
      log_level: 3,
      kafkaJS: {
        clientId: 'once-confluent-client',
        brokers: testBrokers(),
        logLevel: lib.KafkaJS.logLevel.NOTHING,
      },
    }),
  );
});
afterAll(async () => {
  await admin?.disconnect();
});

describe('@once/kafka/confluent client', () => {
  it('keyed messages land on the partition kafkajs DefaultPartitioner (murmur2, as Java) picks', {
    timeout: 60_000,
  }, async () => {
    const topic = uniqueName('cf-partitioner');
    const partitions = 7;
    await createTopicsReady(admin, { [topic]: partitions });
    const keys = Array.from({ length: 120 }, (_, k) =>
      k % 3 === 0 ? Buffer.from([k, 0, 255 - k]) : `key-${k}-é`,
    );
    const producer = client.producer();
    await producer.connect();
    await producer.send([
      { topic, messages: keys.map((key, k) => ({ key, value: String(k), headers: { n: String(k) } })) },
    ]);
    await producer.disconnect();

    const got = new Map<number, number>();
    const reader = kafka.consumer({ groupId: uniqueName('g-cf-partitioner') });
    await reader.connect();
    await reader.subscribe({ topics: [topic], fromBeginning: true });
    await reader.run({
      eachMessage: async ({ partition, message }) => {
        got.set(Number(message.value?.toString()), partition);
      },
    });
    await waitFor('all messages read back', async () => got.size === keys.length, 30_000);
    await reader.disconnect();

    const partitioner = Partitioners.DefaultPartitioner();
    const partitionMetadata = Array.from({ length: partitions }, (_, p) => ({
      partitionId: p,
      leader: 1,
      replicas: [1],
      isr: [1],
      partitionErrorCode: 0,
    }));
    const want = keys.map((key) =>
      partitioner({
        topic,
        partitionMetadata,
        message: { key: typeof key === 'string' ? key : key, value: null },
      }),
    );
    expect(keys.map((_, k) => got.get(k))).toEqual(want);
    expect(new Set(want).size).toBeGreaterThan(3);
  });

  it('createKafkaPublisher on it writes each message once, in order, with its id header, key and body', {
    timeout: 60_000,
  }, async () => {
    const topic = uniqueName('cf-publisher');
    await createTopicsReady(admin, { [topic]: 1 });
    const publisher = createKafkaPublisher({ kafka: client, ackTimeoutMs: 10_000 });
    const messages = Array.from({ length: 20 }, (_, k) => ({
      id: `${topic}-${k}`,
      destination: topic,
      key: `k${k % 3}`,
      body: JSON.stringify({ k, text: 'é\u0000' }),
      headers: { trace: `t${k}` },
    }));
    const results = await publisher.publish(messages.slice(0, 10));
    results.push(...(await publisher.publish(messages.slice(10))));
    await publisher.stop();
    expect(results.every((r) => r.ok)).toBe(true);
    const got = await readTopic(kafka, topic, 20);
    expect(got.map((m) => header(m, 'message-id'))).toEqual(messages.map((m) => m.id));
    expect(got.map((m) => m.key?.toString())).toEqual(messages.map((m) => m.key));
    expect(got.map((m) => m.value?.toString())).toEqual(messages.map((m) => m.body));
    expect(got.map((m) => header(m, 'trace'))).toEqual(messages.map((m) => m.headers.trace));
  });

  it('the replay marker round-trips through a batch commit and the client admin (trailing NUL stripped)', {
    timeout: 60_000,
  }, async () => {
    const topic = uniqueName('cf-marker');
    await createTopicsReady(admin, { [topic]: 1 });
    const producer = client.producer();
    await producer.connect();
    await producer.send([
      {
        topic,
        messages: Array.from({ length: 5 }, (_, k) => ({ key: null, value: String(k), headers: {} })),
      },
    ]);
    await producer.disconnect();
    const groupId = uniqueName('g-cf-marker');
    const consumer = client.consumer({
      groupId,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1_000,
      rebalanceTimeoutMs: 30_000,
      extra: {},
    });
    const marker = encodeMarker({ end: '4' });
    let committed = false;
    await consumer.connect();
    await consumer.subscribe([topic], true);
    await consumer.run({
      concurrency: 1,
      eachBatch: async (batch) => {
        if (committed) return;
        await batch.commit('2', marker);
        committed = true;
      },
    });
    await waitFor('the commit', async () => committed, 30_000);
    await consumer.stop();
    await consumer.disconnect();

    const cadmin = client.admin();
    await cadmin.connect();
    const meta = await cadmin.committedMetadata(groupId, topic);
    await cadmin.disconnect();
    expect(meta.get(0)).toBe(marker);
    expect(decodeMarker(meta.get(0))).toEqual({ end: '4' });
    // What kafkajs reads of the same commit: the offset, and the marker (NUL or not).
    const [t] = await fetchOffsetsReady(admin, { groupId, topics: [topic] });
    expect(t!.partitions[0]!.offset).toBe('2');
    expect(t!.partitions[0]!.metadata?.replace(/\0+$/, '')).toBe(marker);
  });
});
