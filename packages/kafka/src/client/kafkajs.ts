import { createRequire } from 'node:module';
import type {
  ConfigResourceTypes,
  ConsumerCrashEvent,
  ConsumerGroupJoinEvent,
  EachBatchPayload,
  ICustomPartitioner,
  Kafka,
  Offsets,
  ProducerConfig,
} from 'kafkajs';
import {
  type ClientAdmin,
  type ClientProducer,
  type GroupConsumer,
  type GroupConsumerConfig,
  KAFKA_CLIENT,
  type KafkaClient,
  type KafkaLike,
  type PartitionBatch,
} from './types.js';

/**
 * The part of a kafkajs `Kafka` instance this package uses: three factories and nothing else
 * (docs/pitfalls.md K5). The public {@link KafkaLike} says the same structurally, without kafkajs.
 */
export type KafkajsInstance = Pick<Kafka, 'consumer' | 'producer' | 'admin'>;

/** kafkajs' ConfigResourceTypes.TOPIC (the protocol's 2), which its ESM entry does not export by name. */
const TOPIC_RESOURCE = 2 as ConfigResourceTypes;

/** Error types kafkajs raises when this member's generation is over: its partitions may have moved. */
const OWNERSHIP_LOST = new Set([
  'REBALANCE_IN_PROGRESS',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'NOT_COORDINATOR_FOR_GROUP',
  'FENCED_INSTANCE_ID',
]);

/** True for a kafkajs error that means "rejoin the group". */
export function isKafkajsOwnershipLost(err: unknown): boolean {
  const type = (err as { type?: unknown } | null)?.type;
  return typeof type === 'string' && OWNERSHIP_LOST.has(type);
}

/**
 * kafkajs' own default partitioner, named so that kafkajs does not warn about it. Loaded only when
 * a producer is made, so that `@once/kafka`'s main entry never loads kafkajs by itself.
 */
function defaultPartitioner(): ICustomPartitioner {
  const require = createRequire(import.meta.url);
  return (require('kafkajs') as typeof import('kafkajs')).Partitioners.DefaultPartitioner;
}

/**
 * Wraps a kafkajs `Kafka` instance as a {@link KafkaClient}. `partitioner`: the producers'
 * default partitioner (kafkajs' DefaultPartitioner, loaded on first use when not given).
 */
export function kafkajsClient(raw: KafkaLike, partitioner?: ICustomPartitioner): KafkaClient {
  const kafka = raw as KafkajsInstance;
  return {
    [KAFKA_CLIENT]: true,
    name: 'kafkajs',
    capabilities: { commitMetadata: true },
    consumer: (config) => kafkajsConsumer(kafka, config),
    producer: (settings) => kafkajsProducer(kafka, settings as ProducerConfig | undefined, partitioner),
    admin: () => kafkajsAdmin(kafka),
    isOwnershipLost: isKafkajsOwnershipLost,
  };
}

function kafkajsConsumer(kafka: KafkajsInstance, config: GroupConsumerConfig): GroupConsumer {
  const consumer = kafka.consumer({
    // kafkajs sleeps this long when every partition is paused (its default: 5000).
    maxWaitTimeInMs: 1_000,
    ...config.extra,
    groupId: config.groupId,
    sessionTimeout: config.sessionTimeoutMs,
    heartbeatInterval: config.heartbeatIntervalMs,
    rebalanceTimeout: config.rebalanceTimeoutMs,
  });
  const tps = (topic: string, partitions?: readonly number[]) => [
    partitions === undefined ? { topic } : { topic, partitions: [...partitions] },
  ];
  return {
    connect: () => consumer.connect(),
    subscribe: (topics, fromBeginning) => consumer.subscribe({ topics: [...topics], fromBeginning }),
    run: ({ concurrency, eachBatch }) =>
      consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: concurrency,
        eachBatch: (payload) => eachBatch(partitionBatchOf(payload)),
      }),
    onGroupJoin: (listener) => {
      consumer.on(consumer.events.GROUP_JOIN, (e: ConsumerGroupJoinEvent) =>
        listener({
          memberId: e.payload.memberId,
          assignment: Object.fromEntries(
            Object.entries(e.payload.memberAssignment).map(([t, ps]) => [t, [...ps]]),
          ),
        }),
      );
    },
    onCrash: (listener) => {
      consumer.on(consumer.events.CRASH, (e: ConsumerCrashEvent) =>
        listener({ error: e.payload.error, restart: e.payload.restart }),
      );
    },
    pause: (topic, partitions) => consumer.pause(tps(topic, partitions)),
    resume: (topic, partitions) => consumer.resume(tps(topic, partitions)),
    seek: (topic, partition, offset) => consumer.seek({ topic, partition, offset }),
    stop: () => consumer.stop(),
    disconnect: () => consumer.disconnect(),
  };
}

/** One kafkajs eachBatch payload as a {@link PartitionBatch}. */
export function partitionBatchOf(payload: EachBatchPayload): PartitionBatch {
  const { batch } = payload;
  return {
    topic: batch.topic,
    partition: batch.partition,
    messages: batch.messages,
    lastOffset: () => batch.lastOffset(),
    isRunning: () => payload.isRunning(),
    isStale: () => payload.isStale(),
    heartbeat: () => payload.heartbeat(),
    resolveOffset: (offset) => payload.resolveOffset(offset),
    commit: (next, metadata) => {
      // kafkajs sends a partition's metadata with the commit, though its Offsets type omits it.
      const offsets = {
        topics: [
          { topic: batch.topic, partitions: [{ partition: batch.partition, offset: next, metadata }] },
        ],
      };
      return payload.commitOffsetsIfNecessary(offsets as Offsets);
    },
  };
}

function kafkajsProducer(
  kafka: KafkajsInstance,
  settings: ProducerConfig | undefined,
  partitioner: ICustomPartitioner | undefined,
): ClientProducer {
  // Idempotent, acks from all replicas, one request in flight: written once, in order.
  const producer = kafka.producer({
    createPartitioner: settings?.createPartitioner ?? partitioner ?? defaultPartitioner(),
    ...settings,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  return {
    connect: () => producer.connect(),
    send: async (topicMessages, options) => {
      await producer.sendBatch({
        acks: -1,
        ...(options?.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
        topicMessages,
      });
    },
    disconnect: () => producer.disconnect(),
  };
}

function kafkajsAdmin(kafka: KafkajsInstance): ClientAdmin {
  const admin = kafka.admin();
  return {
    connect: () => admin.connect(),
    listTopics: () => admin.listTopics(),
    retentionMs: async (topics) => {
      const res = await admin.describeConfigs({
        includeSynonyms: false,
        resources: topics.map((name) => ({ type: TOPIC_RESOURCE, name, configNames: ['retention.ms'] })),
      });
      const out = new Map<string, number>();
      for (const r of res.resources) {
        const value = r.configEntries.find((e) => e.configName === 'retention.ms')?.configValue;
        if (value !== undefined && value !== null) out.set(r.resourceName, Number(value));
      }
      return out;
    },
    committedMetadata: async (groupId, topic) => {
      const res = await admin.fetchOffsets({ groupId, topics: [topic] });
      const map = new Map<number, string | null>();
      for (const t of res) for (const po of t.partitions) map.set(po.partition, po.metadata);
      return map;
    },
    disconnect: () => admin.disconnect(),
  };
}
