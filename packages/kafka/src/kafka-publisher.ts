import {
  ErrorCode,
  OnceError,
  type OutboxPublisher,
  type OutboxPublishOptions,
  type OutboxPublishResult,
} from '@once/core';
import { Connector, optionCheck, untilAborted } from '@once/core/adapter';
import { MAX_ID_LENGTH } from '@once/core/admin';
import { CLIENT_HINT, clientOf } from './client/resolve.js';
import type {
  ClientHeaders,
  ClientProducer,
  KafkaClient,
  KafkaLike,
  OutgoingMessage,
} from './client/types.js';
import { KafkaErrorCode } from './errors.js';
import { KAFKA_PUBLISHER_KEYS } from './publisher-keys.js';

/** One message to publish; `id` becomes the message-id header (an outbox row id, say). Core's `OutboxMessage` fits. */
export interface PublishMessage {
  /** The message id consumers deduplicate on. At most `MAX_ID_LENGTH` (512) characters. */
  id: string;
  /** The topic. */
  destination: string;
  /** The message value, sent as it is (a string as UTF-8). */
  body: Buffer | string;
  /** Partitioning key: messages with one key keep their order. */
  key?: string | Buffer | undefined;
  /** Kafka headers to send with it; the id header is added to them (and wins over one of the same name). */
  headers?: Readonly<Record<string, string>> | undefined;
}

/** Options of {@link createKafkaPublisher}. */
export interface KafkaPublisherOptions {
  /**
   * The Kafka client: `kafkajs(new Kafka({ brokers }))` from `@once/kafka/kafkajs`, or a kafkajs
   * `Kafka` instance itself (the same as wrapping it).
   */
  kafka: KafkaClient | KafkaLike;
  /** Header the id is written to. @default 'message-id' */
  idHeader?: string;
  /** Broker acknowledgement wait per request, in ms. @default 30000 */
  ackTimeoutMs?: number;
  /**
   * Other producer settings of the client library, passed to it as they are (kafkajs: its
   * `ProducerConfig`); idempotence, `acks` from every in-sync replica and one request in flight
   * are fixed. With kafkajs, `createPartitioner` defaults to
   * `Partitioners.DefaultPartitioner`, kafkajs' own default, named so that kafkajs does not print
   * its partitioner warning.
   */
  producerConfig?: object;
}

const DEFAULTS = Object.freeze({ idHeader: 'message-id', ackTimeoutMs: 30_000 });

/**
 * Publishes to Kafka for the outbox relay: an idempotent producer (no broker-side duplicates from
 * its own retries), `acks: -1` (every in-sync replica) and one request in flight (kafkajs allows
 * more and calls idempotence experimental; one keeps per-partition order under retries). A
 * `publish` resolves only once Kafka acknowledged every message, so a row is marked sent only then.
 */
export class KafkaPublisher implements OutboxPublisher {
  readonly #kafka: KafkaClient;
  readonly #producerConfig: Readonly<Record<string, unknown>>;
  #producer: ClientProducer;
  readonly #header: string;
  readonly #ackTimeoutMs: number;
  /** Connects `#producer`; a dropped connection takes its producer with it (see `#drop`). */
  readonly #link: Connector<ClientProducer>;

  constructor(options: KafkaPublisherOptions) {
    const keys = KAFKA_PUBLISHER_KEYS satisfies Record<keyof KafkaPublisherOptions, true>;
    optionCheck.namingFactory('createKafkaPublisher', () => optionCheck.knownKeys(options, keys));
    const kafka = clientOf(options?.kafka, true);
    if (!kafka) throw new OnceError(ErrorCode.InvalidOption, `option 'kafka' ${CLIENT_HINT}`);
    // The same checks as the consumer's options and the other publishers' timeouts.
    this.#header = optionCheck.name('idHeader', options.idHeader ?? DEFAULTS.idHeader);
    this.#ackTimeoutMs = optionCheck.integer(
      'ackTimeoutMs',
      options.ackTimeoutMs ?? DEFAULTS.ackTimeoutMs,
      1,
    );
    this.#kafka = kafka;
    this.#producerConfig = { ...options.producerConfig };
    this.#producer = kafka.producer(this.#producerConfig);
    this.#link = new Connector(() => {
      const producer = this.#producer;
      return producer.connect().then(
        () => producer,
        (err: unknown) => {
          throw new OnceError(
            KafkaErrorCode.Unreachable,
            `cannot connect the producer: ${(err as Error)?.message ?? err}`,
            {
              retryable: true,
              cause: err,
            },
          );
        },
      );
    }, 'the publisher is stopped');
  }

  /** Connects the producer; `publish` calls it too. */
  async start(): Promise<void> {
    await this.#link.get();
  }

  /**
   * Publishes messages in order and resolves once Kafka acknowledged all of them, with one result
   * per message: a message with an unusable id is refused (`ok: false`, not retryable) and the
   * others are sent. On a rejection none may be assumed sent: publish them again (consumers
   * deduplicate on the id).
   *
   * An aborted `signal` (the relay's deadline) rejects with its reason at once. kafkajs cannot
   * cancel a request, so the producer is dropped (disconnected in the background) and the next
   * publish uses a fresh one: an acknowledgement arriving late reaches nobody.
   */
  async publish(
    messages: readonly PublishMessage[],
    options: OutboxPublishOptions = {},
  ): Promise<OutboxPublishResult[]> {
    if (messages.length === 0) return [];
    const { signal } = options;
    const opening = this.#link.get();
    const producer = await untilAborted(opening, signal, () => this.#drop(opening));
    const results: OutboxPublishResult[] = [];
    const byTopic = new Map<string, OutgoingMessage[]>();
    for (const m of messages) {
      if (typeof m.id !== 'string' || m.id.length === 0 || m.id.length > MAX_ID_LENGTH) {
        const error = new OnceError(
          ErrorCode.InvalidId,
          `message id must be a string of 1 to ${MAX_ID_LENGTH} characters, got ${String(m.id).length} characters`,
        );
        results.push({ id: String(m.id), ok: false, error, retryable: false });
        continue;
      }
      const headers: ClientHeaders = { ...(m.headers ?? {}), [this.#header]: m.id };
      const list = byTopic.get(m.destination) ?? [];
      list.push({ key: m.key ?? null, value: m.body, headers });
      byTopic.set(m.destination, list);
      results.push({ id: m.id, ok: true });
    }
    if (byTopic.size > 0) {
      const sending = producer.send(
        [...byTopic].map(([topic, list]) => ({ topic, messages: list })),
        { timeoutMs: this.#ackTimeoutMs },
      );
      await untilAborted(sending, signal, () => this.#drop(opening));
    }
    return results;
  }

  /** Replaces a producer whose request was abandoned; it is disconnected in the background. */
  #drop(opening: Promise<ClientProducer>): void {
    if (!this.#link.drop(opening)) return;
    const producer = this.#producer;
    this.#producer = this.#kafka.producer(this.#producerConfig);
    producer.disconnect().catch(() => {});
  }

  /** Disconnects the producer. */
  async stop(): Promise<void> {
    if (this.#link.stopped) return;
    await this.#link.stop();
    await this.#producer.disconnect();
  }

  /** Stops the publisher as `stop()` does, for `await using publisher = ...`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** Creates a {@link KafkaPublisher}. */
export function createKafkaPublisher(options: KafkaPublisherOptions): KafkaPublisher {
  return new KafkaPublisher(options);
}
