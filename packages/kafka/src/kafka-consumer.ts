import {
  createInbox,
  type Envelope,
  ErrorCode,
  type FencePosition,
  fingerprint,
  type Inbox,
  OnceError,
  resolveId,
  type SerializedError,
  serializeError,
  warnIfRetentionShort,
} from '@once/core';
import { processGate, readFence } from '@once/core/adapter';
import type { ConfigResourceTypes, ConsumerCrashEvent, ConsumerGroupJoinEvent, KafkaMessage } from 'kafkajs';
import { type DeadLetterOutcome, deadLetterMessage, isRecordedFailed } from './dead-letter.js';
import {
  type KafkaConsumerEventListener,
  type KafkaConsumerEventName,
  KafkaConsumerEvents,
} from './events.js';
import type { AdminLike, ConsumerLike, ProducerLike } from './kafka-like.js';
import {
  type KafkaConsumerOptions,
  type ResolvedKafkaConsumerOptions,
  resolveKafkaConsumerOptions,
} from './options.js';
import { newPartitionState, type PartitionState } from './partition-state.js';
import { runPartitionBatch } from './run-partition-batch.js';

/** kafkajs' ConfigResourceTypes.TOPIC (the protocol's 2), which its ESM entry does not export by name. */
const TOPIC_RESOURCE = 2 as ConfigResourceTypes;
/** Where the consumer is in its life. */
export type KafkaConsumerStatus = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped' | 'failed';

/** A snapshot for health checks and dashboards. */
export interface KafkaConsumerHealth {
  status: KafkaConsumerStatus;
  /** True while running, kafkajs is not in a crash it will not restart from, and no partition is stopped. */
  healthy: boolean;
  groupId: string;
  memberId: string | undefined;
  /** Group joins so far (rebalances + 1). */
  generation: number;
  /** Partitions this member owns, by topic. */
  assignment: Record<string, number[]>;
  /** Partitions paused for a retry backoff, as `topic/partition`. */
  retrying: string[];
  /**
   * Partitions stopped for good, as `topic/partition`: their offset fence does not match the log
   * (`KAFKA_FENCE_MISMATCH`, see `lastError`). Nothing of them runs or is committed until the
   * cause is fixed and the consumer restarted. `healthy` is false while any is stopped.
   */
  stopped: string[];
  /** kafkajs crashes (it restarts after retriable ones). */
  crashes: number;
  /** When a slice last settled, epoch ms. */
  lastProgressAt: number | undefined;
  lastError: (SerializedError & { where: string; at: number }) | undefined;
}

/** Code of the error thrown for a crash-looping message that is not run again. */
export const CONSUMER_KILLED = 'CONSUMER_KILLED';

/**
 * An effectively-once Kafka consumer: kafkajs `eachBatch` with autocommit off, an inbox claim per
 * message in the handler's Postgres transaction, offsets committed only after that transaction
 * and only for the contiguous settled prefix. Create it with {@link createKafkaConsumer}.
 */
export class KafkaConsumer<R = unknown> {
  /** The Kafka options after defaults. */
  readonly options: ResolvedKafkaConsumerOptions;
  /** The inbox doing the processing; subscribe to per-message events with `inbox.on(...)`. */
  readonly inbox: Inbox<R>;
  readonly #events: KafkaConsumerEvents;
  readonly #states = new Map<string, PartitionState>();
  readonly #timers = new Map<string, NodeJS.Timeout>();
  readonly #stopped = new Map<string, OnceError>();
  /** Fresh slices shared, crashed ranges one message at a time, across all partitions. */
  readonly #gate = processGate();
  readonly #doomed = new WeakMap<Envelope, number>();
  #status: KafkaConsumerStatus = 'idle';
  #consumer: ConsumerLike | undefined;
  #producer: ProducerLike | undefined;
  #admin: AdminLike | undefined;
  #generation = 0;
  #memberId: string | undefined;
  #assignment: Record<string, number[]> = {};
  #metadata = new Map<string, Promise<Map<number, string | null>>>();
  #crashes = 0;
  #failed = false;
  #lastProgressAt: number | undefined;
  #lastError: KafkaConsumerHealth['lastError'];
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: KafkaConsumerOptions<R>) {
    this.options = resolveKafkaConsumerOptions(options);
    const user = options.handler;
    this.inbox = createInbox<R>({
      ...options,
      consumer: this.options.consumer,
      fenceOf: this.options.offsetFencing ? fenceOfKafka : options.fenceOf,
      handler: (envelope, ctx) => {
        const starts = this.#doomed.get(envelope);
        if (starts !== undefined) {
          throw new OnceError(
            CONSUMER_KILLED,
            `the consumer died ${starts} times while this message ran alone (offset ${envelope.source.offset}); it is not run again`,
          );
        }
        return user(envelope, ctx);
      },
    });
    this.#events = new KafkaConsumerEvents(this.inbox.options.logger);
    this.#events.on('error', (e) => {
      this.#lastError = { ...e.error, where: e.where, at: Date.now() };
    });
    this.#events.on('slice:done', () => {
      this.#lastProgressAt = Date.now();
    });
  }

  /** Subscribe to a consumer event; returns an unsubscribe function. */
  on<E extends KafkaConsumerEventName>(name: E, listener: KafkaConsumerEventListener<E>): () => void {
    return this.#events.on(name, listener);
  }

  get status(): KafkaConsumerStatus {
    return this.#status;
  }

  /**
   * Checks the schema and the topics, connects and starts consuming. Throws a typed
   * {@link OnceError} when Postgres or Kafka cannot be reached (`DATABASE`, `KAFKA_UNREACHABLE`),
   * the schema is not installed, or a topic does not exist (`UNKNOWN_TOPIC`).
   */
  start(): Promise<void> {
    if (this.#status !== 'idle') {
      if (this.#starting) return this.#starting;
      return Promise.reject(
        new OnceError(ErrorCode.Closed, `the consumer is ${this.#status}; create a new one`),
      );
    }
    this.#status = 'starting';
    this.#starting = this.#start().then(
      () => {
        this.#status = 'running';
      },
      async (err: unknown) => {
        await this.#close();
        this.#status = 'failed';
        throw err;
      },
    );
    return this.#starting;
  }

  /**
   * Warns when a topic keeps messages longer than the inbox keeps ids: a group whose offsets are
   * reset reads them again. Offset fencing keeps no per-message rows, so nothing expires there.
   * Best effort: a failed describeConfigs is only logged at debug level.
   */
  async #checkRetention(admin: AdminLike): Promise<void> {
    const o = this.options;
    if (o.offsetFencing) return;
    const logger = this.inbox.options.logger;
    try {
      const res = await admin.describeConfigs({
        includeSynonyms: false,
        resources: o.topics.map((name) => ({ type: TOPIC_RESOURCE, name, configNames: ['retention.ms'] })),
      });
      for (const r of res.resources) {
        const value = r.configEntries.find((e) => e.configName === 'retention.ms')?.configValue;
        if (value === undefined || value === null) continue;
        const ms = Number(value);
        warnIfRetentionShort(logger, {
          consumer: this.inbox.options.consumer,
          retentionMs: this.inbox.options.retentionMs,
          horizonMs: ms < 0 ? Number.POSITIVE_INFINITY : ms,
          source: `Kafka topic ${r.resourceName} (retention.ms; read again after an offset reset)`,
          remedy: 'or use offsetFencing, which keeps no per-message rows',
        });
      }
    } catch (err) {
      logger.debug('once kafka: could not read topic retention', { error: (err as Error)?.message });
    }
  }

  async #start(): Promise<void> {
    const o = this.options;
    try {
      await this.inbox.ready();
    } catch (err) {
      if (OnceError.is(err)) throw err;
      throw new OnceError(ErrorCode.Database, `cannot reach PostgreSQL: ${(err as Error)?.message ?? err}`, {
        retryable: true,
        cause: err,
      });
    }
    const admin = o.kafka.admin();
    this.#admin = admin;
    await kafkaStep('connect the admin client', () => admin.connect());
    const existing = new Set(await kafkaStep('list topics', () => admin.listTopics()));
    const missing = o.topics.filter((t) => !existing.has(t));
    if (missing.length > 0) {
      throw new OnceError('UNKNOWN_TOPIC', `topic(s) ${missing.join(', ')} do not exist: create them first`);
    }
    await this.#checkRetention(admin);
    if (o.topics.some((t) => o.deadLetterTopicOf(t) !== undefined)) {
      // Idempotent, acks from all replicas, one request in flight: a dead letter is written once, in order.
      const producer = o.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
      this.#producer = producer;
      await kafkaStep('connect the dead-letter producer', () => producer.connect());
    }
    const consumer = o.kafka.consumer({
      maxWaitTimeInMs: 1_000,
      ...o.consumerConfig,
      groupId: o.groupId,
      sessionTimeout: o.sessionTimeoutMs,
      heartbeatInterval: o.heartbeatIntervalMs,
      rebalanceTimeout: o.rebalanceTimeoutMs,
    });
    this.#consumer = consumer;
    consumer.on(consumer.events.GROUP_JOIN, (e: ConsumerGroupJoinEvent) => this.#onJoin(e));
    consumer.on(consumer.events.CRASH, (e: ConsumerCrashEvent) => this.#onCrash(e));
    await kafkaStep('connect the consumer', () => consumer.connect());
    await kafkaStep('subscribe', () =>
      consumer.subscribe({ topics: [...o.topics], fromBeginning: o.fromBeginning }),
    );
    await kafkaStep('run the consumer', () =>
      consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: o.partitionConcurrency,
        eachBatch: (payload) =>
          runPartitionBatch(
            {
              options: o,
              inbox: this.inbox,
              maxAttempts: this.inbox.options.maxAttempts,
              retryDelayMs: this.inbox.options.retryDelayMs,
              hasIdOf: this.inbox.options.idOf !== undefined,
              lease: this.inbox.options.mode === 'lease',
              logger: this.inbox.options.logger,
              events: this.#events,
              state: (topic, partition) => this.#state(topic, partition),
              generation: () => this.#generation,
              owns: (topic, partition) => this.#assignment[topic]?.includes(partition) ?? false,
              isStopping: () => this.#status === 'stopping',
              committedMetadata: (topic, partition) => this.#committedMetadata(topic, partition),
              deadLetter: (topic, partition, message, outcome) =>
                this.#deadLetter(topic, partition, message, outcome),
              retryLater: (topic, partition, offset, delayMs) =>
                this.#retryLater(topic, partition, offset, delayMs),
              doom: (envelope, starts) => this.#doomed.set(envelope, starts),
              gate: this.#gate,
              noteStart: (envelope) => this.inbox.noteStart(envelope),
              ...(o.offsetFencing
                ? {
                    fence: {
                      read: (topic, partition) =>
                        readFence(this.inbox.options.pool, this.inbox.options.quotedSchema, {
                          consumer: this.inbox.options.consumer,
                          stream: topic,
                          partition,
                        }),
                      identify: (envelope) => this.#identify(envelope),
                      stop: (topic, partition, error) => this.#stopPartition(topic, partition, error),
                    },
                  }
                : {}),
            },
            payload,
          ),
      }),
    );
  }

  #state(topic: string, partition: number): PartitionState {
    const key = `${topic}/${partition}`;
    let s = this.#states.get(key);
    if (!s) {
      s = newPartitionState();
      this.#states.set(key, s);
    }
    return s;
  }

  #onJoin(e: ConsumerGroupJoinEvent): void {
    this.#generation += 1;
    this.#memberId = e.payload.memberId;
    this.#assignment = Object.fromEntries(
      Object.entries(e.payload.memberAssignment).map(([t, ps]) => [t, [...ps].sort((a, b) => a - b)]),
    );
    // Markers are read again for the new assignment; a crashed member may have left some.
    this.#metadata.clear();
    this.#events.emit('group:joined', {
      generation: this.#generation,
      memberId: e.payload.memberId,
      assignment: this.#assignment,
    });
  }

  #onCrash(e: ConsumerCrashEvent): void {
    this.#crashes += 1;
    this.#assignment = {};
    if (!e.payload.restart) this.#failed = true;
    const error = serializeError(e.payload.error);
    this.inbox.options.logger.error('once/kafka: kafkajs crashed', {
      error: error.message,
      restart: e.payload.restart,
    });
    this.#lastError = { ...error, where: 'kafkajs', at: Date.now() };
    this.#events.emit('consumer:crashed', { error, restart: e.payload.restart });
  }

  /** Committed offset metadata for a topic's partitions, read once per generation. */
  #committedMetadata(topic: string, partition: number): Promise<string | null> {
    let p = this.#metadata.get(topic);
    if (!p) {
      const admin = this.#admin;
      if (!admin) return Promise.reject(new OnceError(ErrorCode.Closed, 'the admin client is closed'));
      p = admin.fetchOffsets({ groupId: this.options.groupId, topics: [topic] }).then((res) => {
        const map = new Map<number, string | null>();
        for (const t of res) for (const po of t.partitions) map.set(po.partition, po.metadata);
        return map;
      });
      p.catch(() => this.#metadata.delete(topic));
      this.#metadata.set(topic, p);
    }
    return p.then((m) => m.get(partition) ?? null);
  }

  async #deadLetter(
    topic: string,
    partition: number,
    message: KafkaMessage,
    outcome: DeadLetterOutcome,
  ): Promise<void> {
    const target = this.options.deadLetterTopicOf(topic);
    const logger = this.inbox.options.logger;
    if (target === undefined || !this.#producer) {
      const fields = { topic, partition, offset: message.offset, id: outcome.id };
      const reason = outcome.status === 'conflict' ? 'conflict' : outcome.reason;
      if (isRecordedFailed(outcome)) {
        logger.error(
          `once/kafka: message failed (${reason}) and dead-lettering is off; its failed inbox row holds the body and error (once failed list); skipped`,
          fields,
        );
      } else {
        // No row of its own: an invalid id has no key to record under, and a conflict's id
        // belongs to the processed message it collided with. This line is all that is left.
        logger.error(
          `once/kafka: message failed (${reason}) and dead-lettering is off; it is NOT recorded anywhere but this log line; skipped`,
          { ...fields, key: message.key?.toString('base64'), headers: headerNames(message) },
        );
      }
      return;
    }
    await this.#producer.send({
      topic: target,
      acks: -1,
      messages: [deadLetterMessage(message, outcome, this.options.consumer)],
    });
    logger.warn('once/kafka: message dead-lettered', {
      topic,
      partition,
      offset: message.offset,
      to: target,
    });
  }

  /** The id and fingerprint the inbox gives an envelope (what the fence records); undefined without a usable id. */
  #identify(envelope: Envelope): { id: string; fp: Buffer } | undefined {
    const { idOf, fingerprintOf } = this.inbox.options;
    try {
      return {
        id: resolveId(envelope, idOf),
        fp: fingerprint(fingerprintOf ? fingerprintOf(envelope) : envelope.body),
      };
    } catch {
      return undefined;
    }
  }

  /**
   * Stops a partition whose fence does not match its log: paused for the rest of this consumer's
   * life, its retry timer cleared, reported once (error log, `error` event, `health()`).
   */
  #stopPartition(topic: string, partition: number, error: OnceError): void {
    const key = `${topic}/${partition}`;
    clearTimeout(this.#timers.get(key));
    this.#timers.delete(key);
    try {
      this.#consumer?.pause([{ topic, partitions: [partition] }]);
    } catch {
      // Between kafkajs runs: the next batch of the partition finds it stopped and pauses it again.
    }
    if (this.#stopped.has(key)) return;
    this.#stopped.set(key, error);
    this.inbox.options.logger.error(`once/kafka: partition stopped: ${error.message}`, {
      code: error.code,
      topic,
      partition,
    });
    this.#events.emit('error', { where: 'fence-check', error: serializeError(error), topic, partition });
  }

  /** Pauses a partition, seeks back to `offset` and resumes it after `delayMs`. */
  #retryLater(topic: string, partition: number, offset: string, delayMs: number): void {
    const consumer = this.#consumer;
    if (!consumer) return;
    const key = `${topic}/${partition}`;
    const tp = [{ topic, partitions: [partition] }];
    try {
      consumer.pause(tp);
      consumer.seek({ topic, partition, offset });
    } catch (err) {
      // kafkajs throws when it is between runs (a crash restart): it reads from the committed offset then.
      this.#events.emit('error', { where: 'seek', error: serializeError(err), topic, partition });
    }
    clearTimeout(this.#timers.get(key));
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      try {
        consumer.resume(tp);
      } catch (err) {
        this.#events.emit('error', { where: 'resume', error: serializeError(err), topic, partition });
      }
    }, delayMs);
    timer.unref?.();
    this.#timers.set(key, timer);
  }

  /** A snapshot of the consumer's state. */
  health(): KafkaConsumerHealth {
    return {
      status: this.#status,
      healthy:
        this.#status === 'running' && !this.#failed && this.#stopped.size === 0 && this.inbox.available,
      groupId: this.options.groupId,
      memberId: this.#memberId,
      generation: this.#generation,
      assignment: this.#assignment,
      retrying: [...this.#timers.keys()],
      stopped: [...this.#stopped.keys()],
      crashes: this.#crashes,
      lastProgressAt: this.#lastProgressAt,
      lastError: this.#lastError,
    };
  }

  /**
   * Stops gracefully: no new slice starts, the slices in flight finish and their offsets are
   * committed, then the group is left and every client closed. Safe to call more than once.
   */
  stop(): Promise<void> {
    if (this.#stopping) return this.#stopping;
    this.#stopping = (async () => {
      if (this.#starting) await this.#starting.catch(() => {});
      if (this.#status === 'failed' || this.#status === 'idle') {
        this.#status = 'stopped';
        return;
      }
      this.#status = 'stopping';
      await this.#close();
      this.#status = 'stopped';
    })();
    return this.#stopping;
  }

  async #close(): Promise<void> {
    const logger = this.inbox.options.logger;
    const quietly = async (what: string, fn: (() => Promise<void>) | undefined): Promise<void> => {
      try {
        await fn?.();
      } catch (err) {
        logger.warn(`once/kafka: ${what} failed while stopping`, { error: String(err) });
      }
    };
    const consumer = this.#consumer;
    await quietly('disconnecting the consumer', consumer && (() => consumer.disconnect()));
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
    const producer = this.#producer;
    const admin = this.#admin;
    await quietly('disconnecting the producer', producer && (() => producer.disconnect()));
    await quietly('disconnecting the admin client', admin && (() => admin.disconnect()));
    this.#consumer = undefined;
    this.#producer = undefined;
    this.#admin = undefined;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** Runs a Kafka call of the start sequence; a failure becomes a KAFKA_UNREACHABLE error that says which. */
async function kafkaStep<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (OnceError.is(err)) throw err;
    throw new OnceError('KAFKA_UNREACHABLE', `cannot ${what}: ${(err as Error)?.message ?? err}`, {
      retryable: true,
      cause: err,
    });
  }
}

/** Creates a {@link KafkaConsumer}; validates the options and names the first bad field. */
export function createKafkaConsumer<R = unknown>(options: KafkaConsumerOptions<R>): KafkaConsumer<R> {
  return new KafkaConsumer(options);
}

/** Offset fencing on a Kafka envelope's topic, partition and offset. */
function fenceOfKafka(envelope: Envelope): FencePosition | undefined {
  const { queue, partition, offset } = envelope.source;
  if (partition === undefined || offset === undefined) return undefined;
  return { stream: queue, partition, offset };
}

/** The header names of a message, for a log line about a message that is kept nowhere else. */
function headerNames(message: KafkaMessage): string[] {
  return Object.keys(message.headers ?? {});
}
