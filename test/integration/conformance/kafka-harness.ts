import { DEAD_LETTER_RECORD } from '@once/core/adapter';
import * as kafkaAdapter from '@once/kafka';
import { createKafkaConsumer, type KafkaClient, type KafkaConsumer } from '@once/kafka';
import { type Admin, Kafka, logLevel } from 'kafkajs';
import {
  createTopicsReady,
  fetchOffsetsReady,
  fetchTopicOffsetsReady,
  serviceUrls,
  uniqueName,
} from '../../support/index.js';
import { onceKafka } from '../../support/kafka-client.mjs';
import type {
  BrokerHarness,
  ConformanceDb,
  ConsumerSpec,
  DeadLetterCopy,
  DeadLetterDetail,
  Destination,
  OutMessage,
  RunningConsumer,
} from './harness.js';
import { deadLetterWhy, inboxOptionsOf, startTracked } from './harness.js';

/** Partitions of every conformance topic: enough that two members split it and keys spread. */
export const KAFKA_PARTITIONS = 4;

/**
 * Settings shared with fixtures/consumer-child.mjs. The session timeout is the broker's minimum
 * (group.min.session.timeout.ms, 6 s) so a dead member leaves the group quickly; small slices
 * give a run many transactions and offset commits, so a crash lands between them.
 */
export const KAFKA_CONSUMER_SETTINGS = Object.freeze({
  fromBeginning: true,
  sessionTimeoutMs: 6_000,
  heartbeatIntervalMs: 500,
  batchSize: 10,
});

const groupOf = (dest: Destination, consumer: string) => `${dest.name}-${consumer}`;

/** Kafka: a topic with {@link KAFKA_PARTITIONS} partitions and `<topic>.dlq`, consumed by createKafkaConsumer. */
export function kafkaHarness(db: ConformanceDb): BrokerHarness {
  const kafka = new Kafka({
    clientId: uniqueName('conformance'),
    brokers: [...serviceUrls().kafkaBrokers],
    logLevel: logLevel.NOTHING,
    retry: { retries: 8, initialRetryTime: 100 },
  });
  let admin: Admin | undefined;
  // The consumers under test run on the run's client library (ONCE_KAFKA_CLIENT); producing,
  // reading back and admin stay on kafkajs.
  let client: Promise<KafkaClient> | undefined;
  let creating: Promise<void> = Promise.resolve();
  const topics: string[] = [];
  const running = new Set<KafkaConsumer>();
  const owners = new WeakMap<RunningConsumer, KafkaConsumer>();
  const connected = async (): Promise<Admin> => {
    if (!admin) {
      admin = kafka.admin();
      await admin.connect();
    }
    return admin;
  };

  async function deadLetterDetails(
    dest: Destination,
    count: number,
    timeoutMs = 30_000,
  ): Promise<DeadLetterDetail[]> {
    const reader = kafka.consumer({
      groupId: uniqueName(`${dest.name}-dlq-reader`),
      sessionTimeout: 6_000,
      heartbeatInterval: 500,
    });
    const got: DeadLetterDetail[] = [];
    const last = (v: unknown) => (Array.isArray(v) ? v.at(-1) : v) as Buffer | string | undefined;
    const text = (v: unknown) => {
      const l = last(v);
      return l === undefined ? undefined : String(l);
    };
    await reader.connect();
    try {
      await reader.subscribe({ topics: [`${dest.name}.dlq`], fromBeginning: true });
      await reader.run({
        eachMessage: async ({ message }) => {
          const h = message.headers ?? {};
          const rawId = last(h['message-id']);
          got.push({
            id: text(h['message-id']),
            rawId: rawId === undefined ? undefined : Buffer.from(rawId),
            body: message.value ?? Buffer.alloc(0),
            ...deadLetterWhy(last(h[DEAD_LETTER_RECORD])),
          });
        },
      });
      const until = Date.now() + timeoutMs;
      while (got.length < count && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    } finally {
      await reader.disconnect();
    }
    return got;
  }

  return {
    broker: 'kafka',
    async create(prefix) {
      const topic = uniqueName(prefix);
      topics.push(topic, `${topic}.dlq`);
      // One creation at a time on the shared admin; a young or loaded broker's "not yet" answers
      // ("This server does not host this topic-partition") are waited out, as in the package tests.
      const created = creating.then(async () => {
        await createTopicsReady(await connected(), {
          [topic]: KAFKA_PARTITIONS,
          [`${topic}.dlq`]: 1,
        });
      });
      creating = created.catch(() => {});
      await created;
      return { name: topic };
    },

    async publish(dest, messages: readonly OutMessage[]) {
      // Idempotent, one request in flight: the producer itself adds no duplicates or reordering.
      const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      try {
        await producer.send({
          topic: dest.name,
          acks: -1,
          messages: messages.map((m) => ({
            key: m.key,
            value: m.body,
            headers: { ...m.headers, ...(m.id === undefined ? {} : { 'message-id': m.id }) },
          })),
        });
      } finally {
        await producer.disconnect();
      }
    },

    async start(dest, spec: ConsumerSpec) {
      client ??= onceKafka(uniqueName('conformance-once'));
      const consumer = createKafkaConsumer({
        kafka: await client,
        groupId: groupOf(dest, spec.consumer),
        consumer: spec.consumer,
        topics: [dest.name],
        pool: db.pool,
        schema: db.schema,
        handler: spec.handler,
        ...KAFKA_CONSUMER_SETTINGS,
        ...inboxOptionsOf(spec.options),
        ...(spec.options?.batch === undefined ? {} : { batch: spec.options.batch }),
      });
      const handle = await startTracked(consumer, spec, running);
      owners.set(handle, consumer);
      return handle;
    },

    balanced(dest, members) {
      const owned: number[] = [];
      for (const m of members) {
        const mine = owners.get(m)?.health().assignment[dest.name] ?? [];
        if (mine.length === 0) return false;
        owned.push(...mine);
      }
      return owned.length === KAFKA_PARTITIONS && new Set(owned).size === KAFKA_PARTITIONS;
    },

    async settled(dest, consumer) {
      const a = await connected();
      const ends = new Map(
        (await fetchTopicOffsetsReady(a, dest.name)).map((p) => [p.partition, BigInt(p.high)]),
      );
      const [t] = await fetchOffsetsReady(a, { groupId: groupOf(dest, consumer), topics: [dest.name] });
      // An empty partition has nothing to commit: its committed offset stays -1 while its end is 0.
      return (t?.partitions ?? []).every((p) => {
        const end = ends.get(p.partition) ?? 0n;
        return end === 0n || BigInt(p.offset) >= end;
      });
    },

    async deadLetters(dest, count, timeoutMs = 30_000): Promise<DeadLetterCopy[]> {
      return (await deadLetterDetails(dest, count, timeoutMs)).map(({ id, reason }) => ({ id, reason }));
    },

    deadLetterDetails,

    // Looked up by name: the corpus picks it up once @once/kafka exports one.
    jsonHandler: (kafkaAdapter as Record<string, unknown>).jsonHandler as BrokerHarness['jsonHandler'],

    childConfig(dest, consumer) {
      return {
        broker: 'kafka',
        topic: dest.name,
        groupId: groupOf(dest, consumer),
        ...KAFKA_CONSUMER_SETTINGS,
      };
    },

    async close() {
      for (const c of running) await c.stop().catch(() => {});
      running.clear();
      if (admin) {
        await admin.deleteTopics({ topics }).catch(() => {});
        await admin.disconnect();
      }
    },
  };
}
