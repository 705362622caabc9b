import type { InboxOptions } from '@once/core';
import {
  type AdapterOptionKey,
  optionCheck,
  type ResolvedOptions,
  splitOptions,
  withDefaults,
} from '@once/core/adapter';
import { CLIENT_HINT, clientOf } from './client/resolve.js';
import type { KafkaClient, KafkaLike } from './client/types.js';

/**
 * Where a message's id comes from (`idOf`, when given, overrides both).
 * - `header`: the `idHeader` header (what once's publishers set).
 * - `offset`: `topic/partition/offset`. Catches redeliveries but not producer duplicates, and
 *   collides when a topic is deleted and recreated.
 */
export type KafkaIdSource = 'header' | 'offset';

/** Options of {@link createKafkaConsumer}: the inbox's options plus the Kafka ones. */
export interface KafkaConsumerOptions<R = unknown> extends Omit<InboxOptions<R>, 'consumer'> {
  /**
   * The Kafka client: `kafkajs(new Kafka({ brokers }))` from `@once/kafka/kafkajs`. A kafkajs
   * `Kafka` instance itself is accepted too (the same as wrapping it).
   */
  kafka: KafkaClient | KafkaLike;
  /** The Kafka consumer group. */
  groupId: string;
  /** Topics to consume; each must exist at start. */
  topics: readonly string[];
  /** The name effects are recorded under in the inbox. @default groupId */
  consumer?: string | undefined;
  /**
   * One transaction per slice of a kafkajs batch (one COMMIT for up to `batchSize` messages);
   * `false`: one transaction per message. @default true
   */
  batch?: boolean | undefined;
  /** Messages per slice: per transaction with `batch`, per offset commit without. @default 200 */
  batchSize?: number | undefined;
  /**
   * Wall time in ms after which no new slice of a kafkajs batch is started: the done prefix is
   * committed and the rest is fetched again. Keeps rebalances from waiting on long batches.
   * @default 5000
   */
  maxBatchMs?: number | undefined;
  /** Partitions processed at the same time (each in order). @default 3 */
  concurrency?: number | undefined;
  /** Where the id comes from (see {@link KafkaIdSource}); `idOf` overrides it. @default 'header' */
  idFrom?: KafkaIdSource | undefined;
  /** The header holding the id when `idFrom` is `header`. @default 'message-id' */
  idHeader?: string | undefined;
  /**
   * Where `failed` and rejected `conflict` messages go, by source topic, or `false` to only record
   * and log them. @default `${topic}.dlq`
   */
  deadLetterTopic?: string | ((topic: string) => string) | false | undefined;
  /**
   * Retry delays up to this many ms are waited out in place (heartbeats go on, the partition's
   * later messages wait); longer ones pause the partition, seek back and resume after the delay,
   * so the consumer's other partitions keep going. @default 1000
   */
  inlineRetryMaxMs?: number | undefined;
  /** Start a new group from the earliest offset. @default false */
  fromBeginning?: boolean | undefined;
  /** kafkajs session timeout in ms. @default 30000 */
  sessionTimeoutMs?: number | undefined;
  /** kafkajs heartbeat interval in ms; heartbeats also run while a slice is processed. @default 3000 */
  heartbeatIntervalMs?: number | undefined;
  /** kafkajs rebalance timeout in ms. @default 60000 */
  rebalanceTimeoutMs?: number | undefined;
  /**
   * Record each slice's offset range in the group's committed-offset metadata before it runs, so
   * a message that kills the process is replayed alone after a restart, its starts counted in
   * PostgreSQL, and dead-lettered after `maxAttempts` starts. @default true
   */
  crashReplay?: boolean | undefined;
  /** How long `stop()` waits for the slices in flight to settle, in ms. @default 30000 */
  stopTimeoutMs?: number | undefined;
  /**
   * Other consumer settings of the client library, passed to it as they are (kafkajs: its
   * `ConsumerConfig`; see docs/kafka.md for each client). The group, the session, heartbeat and
   * rebalance timeouts come from the options above, and commits are always once's own
   * (autocommit off). With kafkajs `maxWaitTimeInMs` defaults to 1000 here (kafkajs: 5000): kafkajs
   * sleeps that long when every partition is paused.
   */
  consumerConfig?: object | undefined;
}

/** The Kafka options after defaults, frozen. Inbox options are resolved by core. */
export interface ResolvedKafkaConsumerOptions
  extends ResolvedOptions<
    KafkaConsumerOptions,
    | Exclude<AdapterOptionKey<KafkaConsumerOptions>, 'kafka' | 'deadLetterTopic' | 'consumerConfig'>
    | 'consumer'
  > {
  /** The client the `kafka` option names. */
  readonly kafka: KafkaClient;
  /** Dead-letter topic for a source topic, or undefined when dead-lettering is off. */
  readonly deadLetterTopicOf: (topic: string) => string | undefined;
  /** The client's other consumer settings as given, frozen; an empty object when none were. */
  readonly consumerConfig: Readonly<Record<string, unknown>>;
}

/** Defaults of the Kafka-specific options. */
export const DEFAULT_KAFKA_CONSUMER_OPTIONS = Object.freeze({
  batch: true,
  batchSize: 200,
  maxBatchMs: 5_000,
  concurrency: 3,
  idFrom: 'header' as KafkaIdSource,
  idHeader: 'message-id',
  inlineRetryMaxMs: 1_000,
  fromBeginning: false,
  sessionTimeoutMs: 30_000,
  heartbeatIntervalMs: 3_000,
  rebalanceTimeoutMs: 60_000,
  crashReplay: true,
  stopTimeoutMs: 30_000,
});

type KafkaOptionKey = AdapterOptionKey<KafkaConsumerOptions>;

const KAFKA_KEYS = {
  kafka: true,
  groupId: true,
  topics: true,
  batch: true,
  batchSize: true,
  maxBatchMs: true,
  concurrency: true,
  idFrom: true,
  idHeader: true,
  deadLetterTopic: true,
  inlineRetryMaxMs: true,
  fromBeginning: true,
  sessionTimeoutMs: true,
  heartbeatIntervalMs: true,
  rebalanceTimeoutMs: true,
  crashReplay: true,
  stopTimeoutMs: true,
  consumerConfig: true,
} as const satisfies Record<KafkaOptionKey, true>;

/** Kafka's limit on topic and group names. */
const NAME_MAX = 249;

/**
 * Splits the options into the inbox's and Kafka's (refusing unknown keys and missing required
 * ones), applies the Kafka defaults and validates them, naming the first bad field.
 */
function resolveKafkaConsumerOptionsUnnamed<R>(options: KafkaConsumerOptions<R>): {
  kafka: ResolvedKafkaConsumerOptions;
  inbox: Omit<KafkaConsumerOptions<R>, KafkaOptionKey>;
} {
  const { inbox, adapter } = splitOptions(options, {
    factory: 'createKafkaConsumer',
    adapterKeys: KAFKA_KEYS,
    required: ['kafka', 'groupId', 'topics'],
  });
  const o = withDefaults(DEFAULT_KAFKA_CONSUMER_OPTIONS, adapter);
  const kafka = clientOf(o.kafka);
  if (!kafka) throw optionCheck.invalid('kafka', CLIENT_HINT);
  const groupId = optionCheck.name('groupId', o.groupId, NAME_MAX);
  if (!Array.isArray(o.topics) || o.topics.length === 0) {
    throw optionCheck.invalid(
      'topics',
      `must be a non-empty array of topic names, got ${JSON.stringify(o.topics)}`,
    );
  }
  const topics = Object.freeze(o.topics.map((t, i) => optionCheck.name(`topics[${i}]`, t, NAME_MAX)));
  const sessionTimeoutMs = optionCheck.durationMs('sessionTimeoutMs', o.sessionTimeoutMs, 1_000);
  const heartbeatIntervalMs = optionCheck.durationMs('heartbeatIntervalMs', o.heartbeatIntervalMs, 100);
  if (heartbeatIntervalMs >= sessionTimeoutMs) {
    throw optionCheck.invalid(
      'heartbeatIntervalMs',
      `must be below sessionTimeoutMs (${sessionTimeoutMs}), got ${heartbeatIntervalMs}`,
    );
  }
  const dlq = o.deadLetterTopic;
  let deadLetterTopicOf: (topic: string) => string | undefined;
  if (dlq === undefined) deadLetterTopicOf = (topic) => `${topic}.dlq`;
  else if (dlq === false) deadLetterTopicOf = () => undefined;
  else if (typeof dlq === 'string') {
    optionCheck.name('deadLetterTopic', dlq, NAME_MAX);
    deadLetterTopicOf = () => dlq;
  } else if (typeof dlq === 'function')
    deadLetterTopicOf = (topic) => optionCheck.name('deadLetterTopic(topic)', dlq(topic), NAME_MAX);
  else
    throw optionCheck.invalid(
      'deadLetterTopic',
      'must be a topic name, a function of the source topic, or false',
    );
  if (o.consumerConfig !== undefined && (typeof o.consumerConfig !== 'object' || o.consumerConfig === null)) {
    throw optionCheck.invalid(
      'consumerConfig',
      "must be an object of the client library's consumer settings",
    );
  }
  return {
    inbox,
    kafka: Object.freeze({
      kafka,
      groupId,
      topics,
      consumer: optionCheck.consumerName(options.consumer, groupId),
      batch: optionCheck.boolean('batch', o.batch),
      batchSize: optionCheck.integer('batchSize', o.batchSize),
      maxBatchMs: optionCheck.durationMs('maxBatchMs', o.maxBatchMs, 1),
      concurrency: optionCheck.integer('concurrency', o.concurrency),
      idFrom: optionCheck.oneOf('idFrom', o.idFrom, ['header', 'offset']),
      idHeader: optionCheck.name('idHeader', o.idHeader),
      deadLetterTopicOf,
      inlineRetryMaxMs: optionCheck.durationMs('inlineRetryMaxMs', o.inlineRetryMaxMs),
      fromBeginning: optionCheck.boolean('fromBeginning', o.fromBeginning),
      sessionTimeoutMs,
      heartbeatIntervalMs,
      rebalanceTimeoutMs: optionCheck.durationMs(
        'rebalanceTimeoutMs',
        o.rebalanceTimeoutMs,
        sessionTimeoutMs,
      ),
      crashReplay: optionCheck.boolean('crashReplay', o.crashReplay),
      stopTimeoutMs: optionCheck.durationMs('stopTimeoutMs', o.stopTimeoutMs),
      consumerConfig: Object.freeze({ ...(o.consumerConfig ?? {}) }),
    }),
  };
}

/**
 * Splits the options into the inbox's and the adapter's (refusing unknown keys and missing
 * required ones), applies the adapter's defaults and validates them; an error names
 * `createKafkaConsumer` and the first bad option.
 */
export function resolveKafkaConsumerOptions<R>(
  options: KafkaConsumerOptions<R>,
): ReturnType<typeof resolveKafkaConsumerOptionsUnnamed<R>> {
  return optionCheck.namingFactory('createKafkaConsumer', () => resolveKafkaConsumerOptionsUnnamed(options));
}
