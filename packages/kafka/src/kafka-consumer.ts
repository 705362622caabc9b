import { createInbox, type Envelope, ErrorCode, type FencePosition, type Inbox, OnceError } from '@once/core';
import {
  type Consumer,
  type ConsumerHealth,
  ConsumerLifecycle,
  type ConsumerState,
  fingerprint,
  isRecordedFailed,
  processGate,
  readFence,
  resolveId,
  StartCounter,
  serializeError,
  warnIfRetentionShort,
} from '@once/core/adapter';
import type { ConfigResourceTypes, ConsumerCrashEvent, ConsumerGroupJoinEvent, KafkaMessage } from 'kafkajs';
import { type DeadLetterOutcome, deadLetterMessage } from './dead-letter.js';
import { KafkaErrorCode } from './errors.js';
import type { KafkaConsumerEventListener, KafkaConsumerEventMap, KafkaConsumerEventName } from './events.js';
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
/** Where the consumer is in its life (the kit's states; a Kafka consumer is never `reconnecting`). */
export type KafkaConsumerState = ConsumerState;

/**
 * A snapshot for health checks and dashboards. `healthy`: running, the database and schema
 * usable, kafkajs not in a crash it will not restart from, and no partition stopped.
 */
export interface KafkaConsumerHealth extends ConsumerHealth {
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
}

/** Longest wait for a start count of a replayed message, in ms (see StartCounter). */
const START_COUNT_WAIT_MS = 5_000;

/**
 * An effectively-once Kafka consumer: kafkajs `eachBatch` with autocommit off, an inbox claim per
 * message in the handler's Postgres transaction, offsets committed only after that transaction
 * and only for the contiguous settled prefix. Create it with {@link createKafkaConsumer}.
 */
export class KafkaConsumer<R = unknown> implements Consumer<R, KafkaConsumerEventMap, KafkaConsumerHealth> {
  /** The Kafka options after defaults. */
  readonly options: ResolvedKafkaConsumerOptions;
  /** The inbox doing the processing; subscribe to per-message events with `inbox.on(...)`. */
  readonly inbox: Inbox<R>;
  readonly #life: ConsumerLifecycle<R, KafkaConsumerEventMap>;
  readonly #counter: StartCounter<R>;
  readonly #states = new Map<string, PartitionState>();
  readonly #timers = new Map<string, NodeJS.Timeout>();
  readonly #stopped = new Map<string, OnceError>();
  /** Fresh slices shared, crashed ranges one message at a time, across all partitions. */
  readonly #gate = processGate();
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

  constructor(options: KafkaConsumerOptions<R>) {
    const { kafka, inbox } = resolveKafkaConsumerOptions(options);
    this.options = kafka;
    this.#counter = new StartCounter<R>({
      inbox: () => this.inbox,
      waitMs: START_COUNT_WAIT_MS,
      onExhausted: (envelope, starts) =>
        this.#life.events.emit('message:killed-consumer', {
          id: envelope.id,
          starts,
          source: envelope.source,
        }),
    });
    this.inbox = createInbox<R>({
      ...inbox,
      consumer: kafka.consumer,
      fenceOf: kafka.offsetFencing ? fenceOfKafka : inbox.fenceOf,
      handler: this.#counter.wrap(inbox.handler),
    });
    this.#life = new ConsumerLifecycle<R, KafkaConsumerEventMap>({
      name: 'once/kafka',
      inbox: this.inbox,
      logger: this.inbox.options.logger,
      stopTimeoutMs: kafka.stopTimeoutMs,
    });
    this.#life.attach({
      open: () => this.#open(),
      pause: () => this.#pauseAll(),
      resume: () => this.#resumeAll(),
      drain: () => this.#drain(),
      close: () => this.#close(),
    });
    this.#life.events.on('slice:done', () => {
      this.#lastProgressAt = Date.now();
    });
  }

  /** Subscribe to a consumer event; returns an unsubscribe function. */
  on<E extends KafkaConsumerEventName>(name: E, listener: KafkaConsumerEventListener<E>): () => void {
    return this.#life.events.on(name, listener);
  }

  get state(): KafkaConsumerState {
    return this.#life.state;
  }

  /**
   * Checks the topics, connects and starts consuming. Throws a typed {@link @once/core#OnceError} when Kafka
   * cannot be reached (`KAFKA_UNREACHABLE`) or a topic does not exist (`KAFKA_UNKNOWN_TOPIC`).
   * Never for the database: while PostgreSQL is down or once's schema is missing or too new, the
   * consumer runs unhealthy and holds its partitions, and begins once the schema checks out.
   */
  start(): Promise<void> {
    return this.#life.start();
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
      logger.debug({ error: (err as Error)?.message }, 'once kafka: could not read topic retention');
    }
  }

  async #open(): Promise<void> {
    const o = this.options;
    const admin = o.kafka.admin();
    this.#admin = admin;
    await kafkaStep('connect the admin client', () => admin.connect());
    const existing = new Set(await kafkaStep('list topics', () => admin.listTopics()));
    const missing = o.topics.filter((t) => !existing.has(t));
    if (missing.length > 0) {
      throw new OnceError(
        KafkaErrorCode.UnknownTopic,
        `topic(s) ${missing.join(', ')} do not exist: create them first`,
      );
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
        partitionsConsumedConcurrently: o.concurrency,
        eachBatch: (payload) =>
          runPartitionBatch(
            {
              options: o,
              inbox: this.inbox,
              retryDelayMs: this.inbox.options.retryDelayMs,
              hasIdOf: this.inbox.options.idOf !== undefined,
              lease: this.inbox.options.mode === 'lease',
              logger: this.inbox.options.logger,
              events: this.#life.events,
              state: (topic, partition) => this.#state(topic, partition),
              generation: () => this.#generation,
              owns: (topic, partition) => this.#assignment[topic]?.includes(partition) ?? false,
              isStopping: () => this.#life.stopping,
              isFetching: () => this.#life.fetching,
              committedMetadata: (topic, partition) => this.#committedMetadata(topic, partition),
              deadLetter: (topic, partition, message, outcome) =>
                this.#deadLetter(topic, partition, message, outcome),
              retryLater: (topic, partition, offset, delayMs) =>
                this.#retryLater(topic, partition, offset, delayMs),
              gate: this.#gate,
              counter: this.#counter as StartCounter<unknown>,
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
    this.#life.events.emit('group:joined', {
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
    this.inbox.options.logger.error(
      {
        error: error.message,
        restart: e.payload.restart,
      },
      'once/kafka: kafkajs crashed',
    );
    this.#life.events.emit('error', { where: 'kafkajs', error });
    this.#life.events.emit('consumer:crashed', { error, restart: e.payload.restart });
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
          fields,
          `once/kafka: message failed (${reason}) and dead-lettering is off; its failed inbox row holds the body and error (once failed list); skipped`,
        );
      } else {
        // No row of its own: an invalid id has no key to record under, and a conflict's id
        // belongs to the processed message it collided with. This line is all that is left.
        logger.error(
          { ...fields, key: message.key?.toString('base64'), headers: headerNames(message) },
          `once/kafka: message failed (${reason}) and dead-lettering is off; it is NOT recorded anywhere but this log line; skipped`,
        );
      }
      return;
    }
    await this.#producer.send({
      topic: target,
      acks: -1,
      messages: [deadLetterMessage(message, outcome, this.options.consumer)],
    });
    // The warn line (id, reason, destination) comes from the adapter kit; this adds the position.
    logger.debug(
      { topic, partition, offset: message.offset, to: target },
      'once/kafka: message dead-lettered',
    );
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
    this.inbox.options.logger.error(
      {
        code: error.code,
        topic,
        partition,
      },
      `once/kafka: partition stopped: ${error.message}`,
    );
    this.#life.events.emit('error', { where: 'fence-check', error: serializeError(error), topic, partition });
  }

  /**
   * Pauses a partition and seeks back to `offset`; resumes it after `delayMs`, unless the
   * consumer is then holding everything for the database (the resume after that takes it along).
   * Without a delay it waits for that resume.
   */
  #retryLater(topic: string, partition: number, offset: string, delayMs?: number): void {
    const consumer = this.#consumer;
    if (!consumer) return;
    const key = `${topic}/${partition}`;
    const tp = [{ topic, partitions: [partition] }];
    try {
      consumer.pause(tp);
      consumer.seek({ topic, partition, offset });
    } catch (err) {
      // kafkajs throws when it is between runs (a crash restart): it reads from the committed offset then.
      this.#life.events.emit('error', { where: 'seek', error: serializeError(err), topic, partition });
    }
    clearTimeout(this.#timers.get(key));
    this.#timers.delete(key);
    if (delayMs === undefined) return;
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      if (!this.#life.fetching) return;
      try {
        consumer.resume(tp);
      } catch (err) {
        this.#life.events.emit('error', { where: 'resume', error: serializeError(err), topic, partition });
      }
    }, delayMs);
    timer.unref?.();
    this.#timers.set(key, timer);
  }

  /** The database or schema cannot be used: fetch nothing from any topic. */
  #pauseAll(): void {
    this.#consumer?.pause(this.options.topics.map((topic) => ({ topic })));
  }

  /** Fetch again, except partitions waiting out a retry delay and those stopped for good. */
  #resumeAll(): void {
    const consumer = this.#consumer;
    if (!consumer) return;
    consumer.resume(this.options.topics.map((topic) => ({ topic })));
    for (const key of [...this.#timers.keys(), ...this.#stopped.keys()]) {
      const cut = key.lastIndexOf('/');
      consumer.pause([{ topic: key.slice(0, cut), partitions: [Number(key.slice(cut + 1))] }]);
    }
  }

  /** A snapshot of the consumer's state. */
  health(): KafkaConsumerHealth {
    return {
      ...this.#life.health(!this.#failed && this.#stopped.size === 0),
      groupId: this.options.groupId,
      memberId: this.#memberId,
      generation: this.#generation,
      assignment: this.#assignment,
      retrying: [...this.#timers.keys()],
      stopped: [...this.#stopped.keys()],
      crashes: this.#crashes,
      lastProgressAt: this.#lastProgressAt,
    };
  }

  /**
   * Stops gracefully: no new slice starts, the slices in flight finish and their offsets are
   * committed (within `stopTimeoutMs`), then the group is left and every client closed. Safe to
   * call more than once.
   */
  stop(): Promise<void> {
    return this.#life.stop();
  }

  /** Stops fetching and waits for the running eachBatch calls (kafkajs' stop does both). */
  async #drain(): Promise<void> {
    await this.#consumer?.stop();
  }

  async #close(): Promise<void> {
    const logger = this.inbox.options.logger;
    const quietly = async (what: string, fn: (() => Promise<void>) | undefined): Promise<void> => {
      try {
        await fn?.();
      } catch (err) {
        logger.warn({ error: String(err) }, `once/kafka: ${what} failed while stopping`);
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

/** Runs a Kafka call of the start sequence; a failure becomes a `KAFKA_UNREACHABLE` error that says which. */
async function kafkaStep<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (OnceError.is(err)) throw err;
    throw new OnceError(KafkaErrorCode.Unreachable, `cannot ${what}: ${(err as Error)?.message ?? err}`, {
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
