import { createKafkaConsumer, DeadLetterHeader, type KafkaConsumer } from '@once/kafka';
import { type Admin, Kafka, logLevel } from 'kafkajs';
import { serviceUrls, uniqueName } from '../../support/index.js';
import type {
  BrokerHarness,
  ConformanceDb,
  ConsumerSpec,
  DeadLetterCopy,
  Destination,
  OutMessage,
  RunningConsumer,
} from './harness.js';

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
  maxBatchSize: 10,
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

  return {
    broker: 'kafka',
    async create(prefix) {
      const topic = uniqueName(prefix);
      topics.push(topic, `${topic}.dlq`);
      await (await connected()).createTopics({
        waitForLeaders: true,
        topics: [
          { topic, numPartitions: KAFKA_PARTITIONS },
          { topic: `${topic}.dlq`, numPartitions: 1 },
        ],
      });
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
          messages: messages.map((m) => ({ key: m.key, value: m.body, headers: { 'message-id': m.id } })),
        });
      } finally {
        await producer.disconnect();
      }
    },

    async start(dest, spec: ConsumerSpec) {
      const consumer = createKafkaConsumer({
        kafka,
        groupId: groupOf(dest, spec.consumer),
        consumer: spec.consumer,
        topics: [dest.name],
        pool: db.pool,
        schema: db.schema,
        handler: spec.handler,
        ...KAFKA_CONSUMER_SETTINGS,
      });
      running.add(consumer);
      spec.listen?.(consumer.inbox);
      await consumer.start();
      const handle: RunningConsumer = {
        inbox: consumer.inbox,
        async stop() {
          running.delete(consumer);
          await consumer.stop();
        },
      };
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
      const ends = new Map((await a.fetchTopicOffsets(dest.name)).map((p) => [p.partition, BigInt(p.high)]));
      const [t] = await a.fetchOffsets({ groupId: groupOf(dest, consumer), topics: [dest.name] });
      // An empty partition has nothing to commit: its committed offset stays -1 while its end is 0.
      return (t?.partitions ?? []).every((p) => {
        const end = ends.get(p.partition) ?? 0n;
        return end === 0n || BigInt(p.offset) >= end;
      });
    },

    async deadLetters(dest, count, timeoutMs = 30_000): Promise<DeadLetterCopy[]> {
      const reader = kafka.consumer({
        groupId: uniqueName(`${dest.name}-dlq-reader`),
        sessionTimeout: 6_000,
        heartbeatInterval: 500,
      });
      const got: DeadLetterCopy[] = [];
      const text = (v: unknown) => (v === undefined ? undefined : String(Array.isArray(v) ? v.at(-1) : v));
      await reader.connect();
      try {
        await reader.subscribe({ topics: [`${dest.name}.dlq`], fromBeginning: true });
        await reader.run({
          eachMessage: async ({ message }) => {
            got.push({
              id: text(message.headers?.['message-id']),
              reason: text(message.headers?.[DeadLetterHeader.Reason]),
            });
          },
        });
        const until = Date.now() + timeoutMs;
        while (got.length < count && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
      } finally {
        await reader.disconnect();
      }
      return got;
    },

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
