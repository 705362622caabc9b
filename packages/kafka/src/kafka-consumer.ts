import { ErrorCode, OnceError } from '@once/core';
import {
  ConsumerBase,
  type ConsumerHealth,
  type ConsumerState,
  type DeadLetterPlan,
  logDropped,
  optionCheck,
  processGate,
  type StartBudgets,
  serializeError,
} from '@once/core/adapter';
import type {
  ClientAdmin,
  ClientCrash,
  ClientMessage,
  ClientProducer,
  GroupConsumer,
  GroupJoin,
} from './client/types.js';
import { deadLetterMessage } from './dead-letter.js';
import { KAFKA_CONSUMER_EVENT_NAMES, type KafkaConsumerEventMap } from './events.js';
import {
  type KafkaConsumerOptions,
  type ResolvedKafkaConsumerOptions,
  resolveKafkaConsumerOptions,
} from './options.js';
import { PartitionHolds } from './partition-holds.js';
import { newPartitionState, type PartitionState } from './partition-state.js';
import { runPartitionBatch } from './run-partition-batch.js';
import { checkTopics, kafkaStep } from './topic-checks.js';

/** Where the consumer is in its life (the kit's states; a Kafka consumer is never `reconnecting`). */
export type KafkaConsumerState = ConsumerState;

/**
 * A snapshot for health checks and dashboards. `healthy`: running, the database and schema
 * usable, and the client not in a crash it will not restart from.
 */
export interface KafkaConsumerHealth extends ConsumerHealth {
  /** The consumer group id this consumer joins (the `groupId` option). */
  groupId: string;
  /** This member's id in the group; undefined until the first join. */
  memberId: string | undefined;
  /** Group joins so far (rebalances + 1). */
  generation: number;
  /** Partitions this member owns, by topic. */
  assignment: Record<string, number[]>;
  /** Partitions paused for a retry backoff, as `topic/partition`. */
  retrying: string[];
  /** Client crashes (kafkajs and the others restart after retriable ones). */
  crashes: number;
  /** When a slice last settled, epoch ms. */
  lastProgressAt: number | undefined;
}

/**
 * An effectively-once Kafka consumer: per-partition batches of its client (`KafkaClient`) with autocommit off, an inbox claim per
 * message in the handler's Postgres transaction, offsets committed only after that transaction
 * and only for the contiguous settled prefix. Create it with {@link createKafkaConsumer}.
 *
 * `start()` checks the topics, connects and starts consuming. It rejects with a typed
 * {@link @once/core#OnceError} when Kafka cannot be reached (`KAFKA_UNREACHABLE`) or a topic does
 * not exist (`KAFKA_UNKNOWN_TOPIC`); never for the database: while PostgreSQL is down or once's
 * schema is missing or too new, the consumer runs unhealthy and holds its partitions, and begins
 * once the schema checks out. `stop()` is graceful: no new slice starts, the slices in flight
 * finish and their offsets are committed (within `stopTimeoutMs`), then the group is left and
 * every client closed. Safe to call more than once.
 */
export class KafkaConsumer<R = unknown> extends ConsumerBase<R, KafkaConsumerEventMap, KafkaConsumerHealth> {
  /** The events this consumer adds to the kit's: `on()` refuses any other name. */
  protected readonly ownEventNames = KAFKA_CONSUMER_EVENT_NAMES;
  /** The Kafka options after defaults. */
  readonly options: ResolvedKafkaConsumerOptions;
  readonly #states = new Map<string, PartitionState>();
  readonly #holds: PartitionHolds;
  /** Fresh slices shared, crashed ranges one message at a time, across all partitions. */
  readonly #gate = processGate();
  #consumer: GroupConsumer | undefined;
  #producer: ClientProducer | undefined;
  #admin: ClientAdmin | undefined;
  #generation = 0;
  #memberId: string | undefined;
  #assignment: Record<string, number[]> = {};
  #metadata = new Map<string, Promise<Map<number, string | null>>>();
  #crashes = 0;
  #failed = false;
  #lastProgressAt: number | undefined;

  constructor(options: KafkaConsumerOptions<R>) {
    const { kafka, inbox } = resolveKafkaConsumerOptions(options);
    super({
      name: 'once/kafka',
      inbox: { ...inbox, consumer: kafka.consumer },
      stopTimeoutMs: kafka.stopTimeoutMs,
    });
    this.options = kafka;
    this.#holds = new PartitionHolds({
      consumer: () => this.#consumer,
      topics: kafka.topics,
      fetching: () => this.life.fetching,
      events: this.life.events,
    });
    this.life.events.on('slice:done', () => {
      this.#lastProgressAt = Date.now();
    });
  }

  /** Checks the topics, connects the dead-letter producer and the consumer, subscribes, runs. */
  protected async open(): Promise<void> {
    const o = this.options;
    const admin = o.kafka.admin();
    this.#admin = admin;
    await checkTopics(admin, o, this.inbox.options);
    if (o.topics.some((t) => o.deadLetterTopicOf(t) !== undefined)) {
      // Idempotent, acks from all replicas, one request in flight: a dead letter is written once, in order.
      const producer = o.kafka.producer();
      this.#producer = producer;
      await kafkaStep('connect the dead-letter producer', () => producer.connect());
    }
    const consumer = o.kafka.consumer({
      groupId: o.groupId,
      sessionTimeoutMs: o.sessionTimeoutMs,
      heartbeatIntervalMs: o.heartbeatIntervalMs,
      rebalanceTimeoutMs: o.rebalanceTimeoutMs,
      extra: o.consumerConfig as Readonly<Record<string, unknown>>,
    });
    this.#consumer = consumer;
    consumer.onGroupJoin((e) => this.#onJoin(e));
    consumer.onCrash((e) => this.#onCrash(e));
    await kafkaStep('connect the consumer', () => consumer.connect());
    await kafkaStep('subscribe', () => consumer.subscribe(o.topics, o.fromBeginning));
    await kafkaStep('run the consumer', () =>
      consumer.run({
        concurrency: o.concurrency,
        eachBatch: (batch) =>
          runPartitionBatch(
            {
              options: o,
              inbox: this.inbox,
              retryDelayMs: this.inbox.options.retryDelayMs,
              lease: this.inbox.options.mode !== 'transaction' && this.inbox.options.mode.lease !== undefined,
              logger: this.inbox.options.logger,
              events: this.life.events,
              state: (topic, partition) => this.#state(topic, partition),
              generation: () => this.#generation,
              owns: (topic, partition) => this.#assignment[topic]?.includes(partition) ?? false,
              isStopping: () => this.life.stopping,
              isFetching: () => this.life.fetching,
              holdForDatabase: (err) => this.life.holdIfUnavailable(err),
              committedMetadata: (topic, partition) => this.#committedMetadata(topic, partition),
              deadLetter: (topic, partition, message, plan) =>
                this.#deadLetter(topic, partition, message, plan),
              retryLater: (topic, partition, offset, delayMs) =>
                this.#holds.retryLater(topic, partition, offset, delayMs),
              gate: this.#gate,
              starts: this.starts as StartBudgets<unknown>,
              isOwnershipLost: (err) => o.kafka.isOwnershipLost(err),
              commitMetadata: o.kafka.capabilities.commitMetadata,
            },
            batch,
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

  #onJoin(e: GroupJoin): void {
    this.#generation += 1;
    this.#memberId = e.memberId;
    this.#assignment = Object.fromEntries(
      Object.entries(e.assignment).map(([t, ps]) => [t, [...ps].sort((a, b) => a - b)]),
    );
    // Markers are read again for the new assignment; a crashed member may have left some.
    this.#metadata.clear();
    this.life.events.emit('group:joined', {
      generation: this.#generation,
      memberId: e.memberId,
      assignment: this.#assignment,
    });
  }

  #onCrash(e: ClientCrash): void {
    this.#crashes += 1;
    this.#assignment = {};
    if (!e.restart) this.#failed = true;
    const error = serializeError(e.error);
    this.inbox.options.logger.error(
      {
        error: error.message,
        restart: e.restart,
      },
      `once/kafka: ${this.options.kafka.name} crashed`,
    );
    this.life.events.emit('error', { where: this.options.kafka.name, error });
    this.life.events.emit('consumer:crashed', { error, restart: e.restart });
  }

  /** Committed offset metadata for a topic's partitions, read once per generation. */
  #committedMetadata(topic: string, partition: number): Promise<string | null> {
    let p = this.#metadata.get(topic);
    if (!p) {
      const admin = this.#admin;
      if (!admin) return Promise.reject(new OnceError(ErrorCode.Closed, 'the admin client is closed'));
      p = admin.committedMetadata(this.options.groupId, topic);
      p.catch(() => this.#metadata.delete(topic));
      this.#metadata.set(topic, p);
    }
    return p.then((m) => m.get(partition) ?? null);
  }

  async #deadLetter(
    topic: string,
    partition: number,
    message: ClientMessage,
    plan: DeadLetterPlan,
  ): Promise<void> {
    const target = this.options.deadLetterTopicOf(topic);
    const logger = this.inbox.options.logger;
    if (target === undefined || !this.#producer) {
      logDropped(logger, plan, {
        name: 'once/kafka',
        action: 'skipped',
        fields: { topic, partition, offset: message.offset },
        unrecorded: { key: message.key?.toString('base64'), headers: Object.keys(message.headers ?? {}) },
      });
      return;
    }
    await this.#producer.send([{ topic: target, messages: [deadLetterMessage(message, plan.record)] }]);
    // The warn line (id, reason, destination) comes from the adapter kit; this adds the position.
    logger.debug(
      { topic, partition, offset: message.offset, to: target },
      'once/kafka: message dead-lettered',
    );
  }

  /** The database or schema cannot be used: fetch nothing from any topic. */
  protected pause(): void {
    this.#holds.pauseAll();
  }

  /** Fetch again, except partitions waiting out a retry delay. */
  protected resume(): void {
    this.#holds.resumeAll();
  }

  /** A snapshot of the consumer's state. */
  health(): KafkaConsumerHealth {
    return {
      ...this.life.health(!this.#failed),
      groupId: this.options.groupId,
      memberId: this.#memberId,
      generation: this.#generation,
      assignment: this.#assignment,
      retrying: this.#holds.retrying,
      crashes: this.#crashes,
      lastProgressAt: this.#lastProgressAt,
    };
  }

  /** Stops fetching and waits for the running eachBatch calls (the client's stop does both). */
  protected async drain(): Promise<void> {
    await this.#consumer?.stop();
  }

  /** Disconnects the consumer, the dead-letter producer and the admin client; no retry timer fires after. */
  protected async close(): Promise<void> {
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
    this.#holds.clearTimers();
    const producer = this.#producer;
    const admin = this.#admin;
    await quietly('disconnecting the producer', producer && (() => producer.disconnect()));
    await quietly('disconnecting the admin client', admin && (() => admin.disconnect()));
    this.#consumer = undefined;
    this.#producer = undefined;
    this.#admin = undefined;
  }
}

/** Creates a {@link KafkaConsumer}; validates the options and names the first bad field. */
export function createKafkaConsumer<R = unknown>(options: KafkaConsumerOptions<R>): KafkaConsumer<R> {
  return optionCheck.namingFactory('createKafkaConsumer', () => new KafkaConsumer(options));
}
