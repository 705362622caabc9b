import { checkNumber, ErrorCode, type InboxOptions, OnceError } from '@once/core';
import type { ConsumerConfig } from 'kafkajs';
import type { KafkaLike } from './kafka-like.js';

/** How a kafkajs batch is cut into Postgres transactions. */
export type ProcessingMode = 'batch' | 'message';

/** Options of {@link createKafkaConsumer}: the inbox's options plus the Kafka ones. */
export interface KafkaConsumerOptions<R = unknown> extends Omit<InboxOptions<R>, 'consumer'> {
  /** A kafkajs `Kafka` instance (`new Kafka({ brokers })`). */
  kafka: KafkaLike;
  /** The Kafka consumer group. */
  groupId: string;
  /** Topics to consume; each must exist at start. */
  topics: readonly string[];
  /** The name effects are recorded under in the inbox. @default groupId */
  consumer?: string;
  /**
   * `batch`: one transaction per slice of a kafkajs batch (one COMMIT for up to `maxBatchSize`
   * messages). `message`: one transaction per message. @default 'batch'
   */
  processing?: ProcessingMode;
  /** Messages per slice: per transaction in `batch` mode, per offset commit in `message` mode. @default 200 */
  maxBatchSize?: number;
  /**
   * Wall time in ms after which no new slice of a kafkajs batch is started: the done prefix is
   * committed and the rest is fetched again. Keeps rebalances from waiting on long batches.
   * @default 5000
   */
  maxBatchMs?: number;
  /** Partitions processed at the same time (each in order). @default 3 */
  partitionConcurrency?: number;
  /** Header holding the message id (what once's publishers set). @default 'message-id' */
  messageIdHeader?: string;
  /**
   * Use `topic/partition/offset` as the id. Catches redeliveries but not producer duplicates,
   * and collides when a topic is deleted and recreated. Ignored when `idOf` is set. @default false
   */
  idFromOffset?: boolean;
  /**
   * Offset fencing: the claim of a message is the Postgres fence of (consumer, topic, partition)
   * instead of an inbox row. The fence moves past the offset in the transaction of the effects,
   * and a redelivered offset below it is a duplicate, so a processed message writes no inbox
   * row. Only for topics whose producers never send a message twice: a producer's duplicate has
   * a new offset and runs again, and payload conflicts are not detected. Messages run one per
   * transaction. Cannot be combined with `fenceOf`, `storeResult` or lease mode. @default false
   */
  offsetFencing?: boolean;
  /**
   * Where `failed` and rejected `conflict` messages go, by source topic, or `false` to only record
   * and log them. @default `${topic}.dlq`
   */
  deadLetterTopic?: string | ((topic: string) => string) | false;
  /**
   * Retry delays up to this many ms are waited out in place (heartbeats go on, the partition's
   * later messages wait); longer ones pause the partition, seek back and resume after the delay,
   * so the consumer's other partitions keep going. @default 1000
   */
  inlineRetryMaxMs?: number;
  /** Start a new group from the earliest offset. @default false */
  fromBeginning?: boolean;
  /** kafkajs session timeout in ms. @default 30000 */
  sessionTimeoutMs?: number;
  /** kafkajs heartbeat interval in ms; heartbeats also run while a slice is processed. @default 3000 */
  heartbeatIntervalMs?: number;
  /** kafkajs rebalance timeout in ms. @default 60000 */
  rebalanceTimeoutMs?: number;
  /**
   * Record each slice's offset range in the group's committed-offset metadata before it runs, so
   * a message that kills the process is replayed alone after a restart, counted, and
   * dead-lettered after `maxAttempts` deaths. @default true
   */
  crashReplay?: boolean;
  /**
   * Other kafkajs consumer settings. `autoCommit` is always off. `maxWaitTimeInMs` defaults to
   * 1000 here (kafkajs: 5000): kafkajs sleeps that long when every partition is paused.
   */
  consumerConfig?: Omit<
    ConsumerConfig,
    'groupId' | 'sessionTimeout' | 'heartbeatInterval' | 'rebalanceTimeout'
  >;
}

/** The Kafka options after defaults, frozen. Inbox options are resolved by core. */
export interface ResolvedKafkaConsumerOptions {
  readonly kafka: KafkaLike;
  readonly groupId: string;
  readonly topics: readonly string[];
  readonly consumer: string;
  readonly processing: ProcessingMode;
  readonly maxBatchSize: number;
  readonly maxBatchMs: number;
  readonly partitionConcurrency: number;
  readonly messageIdHeader: string;
  readonly idFromOffset: boolean;
  readonly offsetFencing: boolean;
  /** Dead-letter topic for a source topic, or undefined when dead-lettering is off. */
  readonly deadLetterTopicOf: (topic: string) => string | undefined;
  readonly inlineRetryMaxMs: number;
  readonly fromBeginning: boolean;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  readonly rebalanceTimeoutMs: number;
  readonly crashReplay: boolean;
  readonly consumerConfig: Readonly<NonNullable<KafkaConsumerOptions['consumerConfig']>>;
}

/** Defaults of the Kafka-specific options. */
export const DEFAULT_KAFKA_CONSUMER_OPTIONS = Object.freeze({
  processing: 'batch' as ProcessingMode,
  maxBatchSize: 200,
  maxBatchMs: 5_000,
  partitionConcurrency: 3,
  messageIdHeader: 'message-id',
  idFromOffset: false,
  offsetFencing: false,
  inlineRetryMaxMs: 1_000,
  fromBeginning: false,
  sessionTimeoutMs: 30_000,
  heartbeatIntervalMs: 3_000,
  rebalanceTimeoutMs: 60_000,
  crashReplay: true,
});

function invalid(field: string, message: string): OnceError {
  return new OnceError(ErrorCode.InvalidOption, `options.${field} ${message}`);
}

function checkName(field: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 249) {
    throw invalid(
      field,
      `must be a non-empty string of at most 249 characters, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function checkBoolean(field: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw invalid(field, `must be a boolean, got ${JSON.stringify(value)}`);
  return value;
}

/** Applies defaults to the Kafka options and validates them, naming the first bad field. */
export function resolveKafkaConsumerOptions<R>(
  options: KafkaConsumerOptions<R>,
): ResolvedKafkaConsumerOptions {
  if (typeof options !== 'object' || options === null) throw invalid('', 'must be an object');
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const o = { ...DEFAULT_KAFKA_CONSUMER_OPTIONS, ...defined } as typeof DEFAULT_KAFKA_CONSUMER_OPTIONS &
    KafkaConsumerOptions<R>;
  const kafka = o.kafka as Partial<KafkaLike> | undefined;
  if (!kafka || typeof kafka.consumer !== 'function' || typeof kafka.admin !== 'function') {
    throw invalid('kafka', 'must be a kafkajs Kafka instance (new Kafka({ brokers }))');
  }
  const groupId = checkName('groupId', o.groupId);
  if (!Array.isArray(o.topics) || o.topics.length === 0) {
    throw invalid('topics', `must be a non-empty array of topic names, got ${JSON.stringify(o.topics)}`);
  }
  const topics = Object.freeze(o.topics.map((t, i) => checkName(`topics[${i}]`, t)));
  if (!['batch', 'message'].includes(o.processing)) {
    throw invalid('processing', `must be one of 'batch', 'message', got ${JSON.stringify(o.processing)}`);
  }
  const sessionTimeoutMs = checkNumber('sessionTimeoutMs', o.sessionTimeoutMs, 1_000);
  const heartbeatIntervalMs = checkNumber('heartbeatIntervalMs', o.heartbeatIntervalMs, 100);
  if (heartbeatIntervalMs >= sessionTimeoutMs) {
    throw invalid(
      'heartbeatIntervalMs',
      `must be below sessionTimeoutMs (${sessionTimeoutMs}), got ${heartbeatIntervalMs}`,
    );
  }
  const dlq = o.deadLetterTopic;
  let deadLetterTopicOf: (topic: string) => string | undefined;
  if (dlq === undefined) deadLetterTopicOf = (topic) => `${topic}.dlq`;
  else if (dlq === false) deadLetterTopicOf = () => undefined;
  else if (typeof dlq === 'string') deadLetterTopicOf = () => checkName('deadLetterTopic', dlq);
  else if (typeof dlq === 'function')
    deadLetterTopicOf = (topic) => checkName('deadLetterTopic(topic)', dlq(topic));
  else throw invalid('deadLetterTopic', 'must be a topic name, a function of the source topic, or false');
  if (typeof dlq === 'string') checkName('deadLetterTopic', dlq);
  const offsetFencing = checkBoolean('offsetFencing', o.offsetFencing);
  if (offsetFencing && o.fenceOf !== undefined) {
    throw invalid('offsetFencing', 'cannot be combined with fenceOf (it sets fenceOf)');
  }
  if (o.consumerConfig !== undefined && (typeof o.consumerConfig !== 'object' || o.consumerConfig === null)) {
    throw invalid('consumerConfig', 'must be an object of kafkajs consumer settings');
  }
  return Object.freeze({
    kafka: kafka as KafkaLike,
    groupId,
    topics,
    consumer: o.consumer === undefined ? groupId : checkName('consumer', o.consumer),
    processing: o.processing,
    maxBatchSize: checkNumber('maxBatchSize', o.maxBatchSize, 1),
    maxBatchMs: checkNumber('maxBatchMs', o.maxBatchMs, 1),
    partitionConcurrency: checkNumber('partitionConcurrency', o.partitionConcurrency, 1),
    messageIdHeader: checkName('messageIdHeader', o.messageIdHeader),
    idFromOffset: checkBoolean('idFromOffset', o.idFromOffset),
    offsetFencing,
    deadLetterTopicOf,
    inlineRetryMaxMs: checkNumber('inlineRetryMaxMs', o.inlineRetryMaxMs, 0),
    fromBeginning: checkBoolean('fromBeginning', o.fromBeginning),
    sessionTimeoutMs,
    heartbeatIntervalMs,
    rebalanceTimeoutMs: checkNumber('rebalanceTimeoutMs', o.rebalanceTimeoutMs, sessionTimeoutMs),
    crashReplay: checkBoolean('crashReplay', o.crashReplay),
    consumerConfig: Object.freeze({ ...(o.consumerConfig ?? {}) }),
  });
}
