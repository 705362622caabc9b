/**
 * The `@confluentinc/kafka-javascript` client (librdkafka) behind the seam, through its
 * KafkaJS-compatible API (`KafkaJS.Kafka`). Nothing here imports the library: the few shapes this
 * module calls are written below, so `@once/kafka` compiles and loads without it (issue #30).
 *
 * What differs from kafkajs, read from the library's lib/kafkajs/*.js (1.10.1):
 * - the consumer's settings are fixed at `connect()` and `fromBeginning` is a consumer setting
 *   (its `subscribe` refuses it), so the library consumer is made in {@link GroupConsumer.subscribe};
 * - `eachBatch` slices hold at most `js.consumer.max.batch.size` messages (32 by default);
 * - `stop()` rejects "Not implemented": this module stops handing batches to the adapter and waits
 *   for the running ones itself; `heartbeat()` is a no-op (librdkafka heartbeats on its own thread);
 * - no `GROUP_JOIN` or `CRASH` events (`on()` is not implemented): assignments come from its
 *   `rebalance_cb` (eager under the classic protocol, incremental under KIP-848);
 * - `pause()` marks the partition's running batch stale and, with `seek()`, runs between its
 *   batches; a batch returning with unresolved messages is sought back by the library itself;
 * - committed metadata reads back with a trailing NUL byte (`admin.fetchOffsets`), stripped here;
 * - the KafkaJS admin has no `describeConfigs`: `retentionMs` answers `undefined` (start() says the
 *   retention check could not run);
 * - the producer cannot take a partitioner function: librdkafka's `murmur2_random` maps keyed
 *   messages like kafkajs' DefaultPartitioner and Java's client.
 */
import { randomUUID } from 'node:crypto';
import {
  type ClientAdmin,
  type ClientCrash,
  type ClientHeaders,
  type ClientMessage,
  type ClientProducer,
  type GroupConsumer,
  type GroupConsumerConfig,
  type GroupJoin,
  KAFKA_CLIENT,
  type KafkaClient,
  type PartitionBatch,
} from './types.js';

/** librdkafka's codes for "this member's generation (or epoch) is over", as its errors' `code`. */
const OWNERSHIP_LOST_CODES = new Set([
  16, // NOT_COORDINATOR
  22, // ILLEGAL_GENERATION
  25, // UNKNOWN_MEMBER_ID
  27, // REBALANCE_IN_PROGRESS
  82, // FENCED_INSTANCE_ID
  110, // FENCED_MEMBER_EPOCH (KIP-848)
  113, // STALE_MEMBER_EPOCH (KIP-848)
  -142, // _ASSIGNMENT_LOST (local)
]);

/** librdkafka's rebalance event codes. */
const ASSIGN_PARTITIONS = -175;
const REVOKE_PARTITIONS = -174;

/** True for a Confluent (librdkafka) error meaning this member's generation is over. */
export function isConfluentOwnershipLost(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' && OWNERSHIP_LOST_CODES.has(code);
}

/** Raised by a batch's `heartbeat()` once its partition was revoked (librdkafka's `_ASSIGNMENT_LOST`). */
class PartitionRevokedError extends Error {
  readonly code = -142;
  readonly type = 'ERR__ASSIGNMENT_LOST';
}

/** Settings of a Confluent consumer or producer: librdkafka properties beside a `kafkaJS` block. */
export type ConfluentConfig = Readonly<Record<string, unknown>> & {
  /** The KafkaJS-style settings block. */
  readonly kafkaJS?: Readonly<Record<string, unknown>>;
};

/** A topic-partition as the library's `rebalance_cb` gives it. */
interface RdTopicPartition {
  topic: string;
  partition: number;
}

/** The eachBatch payload of the library, as far as this module reads it. */
interface ConfluentBatchPayload {
  batch: {
    topic: string;
    partition: number;
    messages: {
      offset: string;
      key: Buffer | null;
      value: Buffer | null;
      timestamp: string;
      headers?: ClientHeaders;
    }[];
    lastOffset(): string;
  };
  isRunning(): boolean;
  isStale(): boolean;
  resolveOffset(offset: string): void;
}

/** The library's KafkaJS-compatible consumer, as far as this module calls it. */
interface ConfluentConsumerLike {
  connect(): Promise<void>;
  subscribe(s: { topics: string[] }): Promise<void>;
  run(config: {
    eachBatch: (payload: ConfluentBatchPayload) => Promise<void>;
    eachBatchAutoResolve: boolean;
    partitionsConsumedConcurrently: number;
  }): Promise<void>;
  pause(tps: { topic: string; partitions?: number[] }[]): unknown;
  resume(tps: { topic: string; partitions?: number[] }[]): void;
  seek(tpo: { topic: string; partition: number; offset: string }): void;
  commitOffsets(
    tpos: { topic: string; partition: number; offset: string; metadata: string | null }[],
  ): Promise<void>;
  disconnect(): Promise<void>;
}

/** The library's KafkaJS-compatible producer, as far as this module calls it. */
interface ConfluentProducerLike {
  connect(): Promise<void>;
  sendBatch(b: {
    topicMessages: {
      topic: string;
      messages: { key: Buffer | string | null; value: Buffer | string | null; headers: ClientHeaders }[];
    }[];
  }): Promise<unknown>;
  disconnect(): Promise<void>;
}

/** The library's KafkaJS-compatible admin, as far as this module calls it. */
interface ConfluentAdminLike {
  connect(): Promise<void>;
  listTopics(): Promise<string[]>;
  fetchOffsets(o: { groupId: string; topics: string[] }): Promise<
    {
      topic: string;
      partitions: { partition: number; metadata: string | null }[];
    }[]
  >;
  disconnect(): Promise<void>;
}

/**
 * The part of a `KafkaJS.Kafka` instance of `@confluentinc/kafka-javascript` this package uses:
 * its three factories, each taking librdkafka properties beside a `kafkaJS` block.
 */
export interface ConfluentKafkaLike {
  /** Makes a consumer (`{ 'group.protocol': ..., kafkaJS: { groupId, ... } }`). */
  consumer(config: ConfluentConfig): unknown;
  /** Makes a producer (`{ kafkaJS: { idempotent, acks, ... } }`). */
  producer(config: ConfluentConfig): unknown;
  /** Makes an admin client. */
  admin(config?: ConfluentConfig): unknown;
}

/** Settings the `confluent` client puts under once's own, per client kind. */
export interface ConfluentDefaults {
  /**
   * Consumer settings merged under once's own and each consumer's `consumerConfig`: librdkafka
   * properties (`'group.protocol': 'consumer'` for KIP-848, `'js.consumer.max.batch.size'`) and a
   * `kafkaJS` block.
   */
  readonly consumer?: ConfluentConfig | undefined;
}

/** Removes the trailing NUL bytes librdkafka leaves on committed metadata read back. */
export function stripNul(metadata: string | null | undefined): string | null {
  if (metadata === null || metadata === undefined) return null;
  let end = metadata.length;
  while (end > 0 && metadata.charCodeAt(end - 1) === 0) end -= 1;
  return metadata.slice(0, end);
}

/** Wraps a Confluent `KafkaJS.Kafka` instance as a {@link KafkaClient} (arguments checked by the entry). */
export function confluentClient(kafka: ConfluentKafkaLike, defaults: ConfluentDefaults = {}): KafkaClient {
  return {
    [KAFKA_CLIENT]: true,
    name: 'confluent',
    capabilities: { commitMetadata: true },
    consumer: (config) => confluentConsumer(kafka, config, defaults.consumer ?? {}),
    producer: (settings) => confluentProducer(kafka, settings ?? {}),
    admin: () => confluentAdmin(kafka),
    isOwnershipLost: isConfluentOwnershipLost,
  };
}

const key = (topic: string, partition: number) => `${topic}\u0000${partition}`;

function confluentConsumer(
  kafka: ConfluentKafkaLike,
  config: GroupConsumerConfig,
  defaults: ConfluentConfig,
): GroupConsumer {
  const extra = config.extra as ConfluentConfig;
  const joinListeners: ((e: GroupJoin) => void)[] = [];
  const crashListeners: ((e: ClientCrash) => void)[] = [];
  const memberId = `${config.groupId}/${randomUUID()}`;
  /** Partitions this member owns, by `key`; each revocation bumps the partition's epoch. */
  const owned = new Map<string, RdTopicPartition>();
  const epochs = new Map<string, number>();
  let consumer: ConfluentConsumerLike | undefined;
  let connectAsked = false;
  let stopping = false;
  let running = 0;
  let drained: (() => void) | undefined;

  const emitJoin = () => {
    const assignment: Record<string, number[]> = {};
    for (const tp of owned.values()) {
      const partitions = assignment[tp.topic] ?? [];
      partitions.push(tp.partition);
      assignment[tp.topic] = partitions;
    }
    for (const listener of joinListeners) listener({ memberId, assignment });
  };
  const rebalance = (err: { code?: number }, assignment: RdTopicPartition[]) => {
    for (const tp of assignment) {
      const k = key(tp.topic, tp.partition);
      if (err.code === ASSIGN_PARTITIONS) owned.set(k, { topic: tp.topic, partition: tp.partition });
      else if (err.code === REVOKE_PARTITIONS) {
        owned.delete(k);
        epochs.set(k, (epochs.get(k) ?? 0) + 1);
      }
    }
    try {
      emitJoin();
    } catch (e) {
      for (const listener of crashListeners) listener({ error: e, restart: true });
    }
    // Undefined: the library applies the assignment as given.
    return undefined;
  };

  const make = (fromBeginning: boolean): ConfluentConsumerLike => {
    const protocol = String(extra['group.protocol'] ?? defaults['group.protocol'] ?? 'classic');
    const classic = protocol.toLowerCase() === 'classic';
    return kafka.consumer({
      ...defaults,
      ...extra,
      rebalance_cb: rebalance,
      kafkaJS: {
        ...defaults.kafkaJS,
        ...extra.kafkaJS,
        groupId: config.groupId,
        fromBeginning,
        autoCommit: false,
        // The library uses it as max.poll.interval.ms (and doubles that internally).
        rebalanceTimeout: config.rebalanceTimeoutMs,
        // KIP-848: the broker owns session and heartbeat timing; the library refuses both.
        ...(classic
          ? { sessionTimeout: config.sessionTimeoutMs, heartbeatInterval: config.heartbeatIntervalMs }
          : {}),
      },
    }) as ConfluentConsumerLike;
  };
  const live = (): ConfluentConsumerLike => {
    if (!consumer) throw new Error('confluent consumer: subscribe() first');
    return consumer;
  };
  const tps = (topic: string, partitions?: readonly number[]) => [
    partitions === undefined ? { topic } : { topic, partitions: [...partitions] },
  ];

  return {
    connect: async () => {
      connectAsked = true;
    },
    subscribe: async (topics, fromBeginning) => {
      if (!connectAsked) throw new Error('confluent consumer: connect() first');
      const c = make(fromBeginning);
      consumer = c;
      await c.connect();
      await c.subscribe({ topics: [...topics] });
    },
    run: async ({ concurrency, eachBatch }) => {
      const c = live();
      await c.run({
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: concurrency,
        eachBatch: async (payload) => {
          // Stopping: hand nothing more to the adapter; unresolved, the slice is sought back.
          if (stopping) return;
          running += 1;
          try {
            await eachBatch(partitionBatchOf(c, payload, owned, epochs, () => !stopping));
          } finally {
            running -= 1;
            if (running === 0) drained?.();
          }
        },
      });
    },
    onGroupJoin: (listener) => {
      joinListeners.push(listener);
    },
    onCrash: (listener) => {
      crashListeners.push(listener);
    },
    pause: (topic, partitions) => {
      consumer?.pause(tps(topic, partitions));
    },
    resume: (topic, partitions) => {
      consumer?.resume(tps(topic, partitions));
    },
    seek: (topic, partition, offset) => live().seek({ topic, partition, offset }),
    // The library's stop() is "Not implemented": stop handing batches out, wait for the running ones.
    stop: async () => {
      stopping = true;
      // Nothing more is fetched: the library would otherwise refetch and seek back in a loop.
      const byTopic = new Map<string, number[]>();
      for (const tp of owned.values())
        byTopic.set(tp.topic, [...(byTopic.get(tp.topic) ?? []), tp.partition]);
      for (const [topic, partitions] of byTopic) {
        try {
          consumer?.pause(tps(topic, partitions));
        } catch {
          // Not connected any more: nothing is fetched anyway.
        }
      }
      if (running === 0) return;
      await new Promise<void>((resolve) => {
        drained = resolve;
      });
    },
    disconnect: async () => {
      stopping = true;
      const c = consumer;
      consumer = undefined;
      await c?.disconnect();
    },
  };
}

/** One library eachBatch payload as a {@link PartitionBatch}. */
function partitionBatchOf(
  consumer: ConfluentConsumerLike,
  payload: ConfluentBatchPayload,
  owned: ReadonlyMap<string, RdTopicPartition>,
  epochs: ReadonlyMap<string, number>,
  isRunning: () => boolean,
): PartitionBatch {
  const { batch } = payload;
  const k = key(batch.topic, batch.partition);
  const epoch = epochs.get(k) ?? 0;
  const revoked = () => (epochs.get(k) ?? 0) !== epoch || !owned.has(k);
  const messages: ClientMessage[] = batch.messages.map((m) => ({
    offset: m.offset,
    key: m.key,
    value: m.value,
    timestamp: m.timestamp,
    ...(m.headers === undefined ? {} : { headers: m.headers }),
  }));
  return {
    topic: batch.topic,
    partition: batch.partition,
    messages,
    lastOffset: () => batch.lastOffset(),
    isRunning: () => isRunning() && payload.isRunning(),
    isStale: () => payload.isStale() || revoked(),
    heartbeat: async () => {
      // librdkafka heartbeats on its own thread; what is left to say is a known revocation.
      if (revoked()) throw new PartitionRevokedError(`${batch.topic}/${batch.partition} was revoked`);
    },
    resolveOffset: (offset) => payload.resolveOffset(offset),
    commit: (next, metadata) =>
      consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next, metadata }]),
  };
}

function confluentProducer(kafka: ConfluentKafkaLike, settings: ConfluentConfig): ClientProducer {
  // Idempotent, acks from all replicas, one request in flight: written once, in order. The
  // library's kafkaJS mode sets librdkafka's murmur2_random partitioner (kafkajs' and Java's keyed mapping).
  const producer = kafka.producer({
    partitioner: 'murmur2_random',
    ...settings,
    kafkaJS: { ...settings.kafkaJS, idempotent: true, acks: -1, maxInFlightRequests: 1 },
  }) as ConfluentProducerLike;
  return {
    connect: () => producer.connect(),
    send: async (topicMessages, options) => {
      const sent = producer.sendBatch({ topicMessages });
      const ms = options?.timeoutMs;
      if (ms === undefined) {
        await sent;
        return;
      }
      // The library takes no per-send timeout (its message.timeout.ms is per producer). A send
      // that fails after the timeout already answered must not become an unhandled rejection.
      sent.catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          sent,
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`Kafka did not acknowledge within ${ms} ms`)), ms);
          }),
        ]);
      } finally {
        clearTimeout(timer);
      }
    },
    disconnect: () => producer.disconnect(),
  };
}

function confluentAdmin(kafka: ConfluentKafkaLike): ClientAdmin {
  const admin = kafka.admin() as ConfluentAdminLike;
  return {
    connect: () => admin.connect(),
    listTopics: () => admin.listTopics(),
    // The library's KafkaJS admin has no describeConfigs: the check says it cannot run.
    retentionMs: async () => undefined,
    committedMetadata: async (groupId, topic) => {
      const res = await admin.fetchOffsets({ groupId, topics: [topic] });
      const map = new Map<number, string | null>();
      for (const t of res) for (const po of t.partitions) map.set(po.partition, stripNul(po.metadata));
      return map;
    },
    disconnect: () => admin.disconnect(),
  };
}
