import type { InboxOptions } from '@once/core';
import {
  type AdapterOptionKey,
  optionCheck,
  type ResolvedOptions,
  splitOptions,
  withDefaults,
} from '@once/core/adapter';
import type { Options } from 'amqplib';
import { CONNECT_TIMEOUT_MS, withHeartbeat } from './heartbeat.js';
import type { SocketOptionsLike as SocketOptions } from './socket-options.js';

/** RabbitMQ queue types; quorum is recommended (replicated, and safe under partitions: docs/pitfalls.md R4). */
export type QueueType = 'quorum' | 'classic';

/** Options of {@link createRabbitConsumer}: the inbox's options plus the AMQP side. */
export interface RabbitConsumerOptions<R = unknown> extends Omit<InboxOptions<R>, 'consumer'> {
  /** The name effects are recorded under in the inbox. @default queue */
  consumer?: string | undefined;
  /**
   * AMQP URL (`amqp://user:pass@host:5672/vhost`) or amqplib connect options. Without a
   * `heartbeat` in it, once asks for 15 s (a dark path noticed within 30 s; amqplib would take
   * the broker's 60 s).
   */
  url: string | Options.Connect;
  /** amqplib socket options (TLS, timeouts). `clientProperties.connection_name` defaults to `once:<consumer>`. */
  socketOptions?: SocketOptions;
  /** The work queue to consume. */
  queue: string;
  /** Declare the work queue (and so create it when missing). Off: it must exist, else AMQP_QUEUE_NOT_FOUND. @default true */
  assertQueue?: boolean;
  /** Type of every queue this consumer declares. @default 'quorum' */
  queueType?: QueueType;
  /** Unacked deliveries the broker may push to this consumer (the prefetch window), in messages. @default 20 */
  prefetch?: number;
  /** Handlers (or batches) run at once on the work queue. 1 keeps the queue's order. @default 1 */
  concurrency?: number;
  /** One transaction for the deliveries waiting in the prefetch window, one in-order ack. @default false */
  batch?: boolean;
  /** Largest batch, in messages. @default prefetch */
  batchSize?: number;
  /**
   * Delay tiers for retries, in ms: one retry queue each, whose queue-level TTL dead-letters back
   * to the work queue. A retry goes to the smallest tier at least as long as core's `retryDelayMs`
   * for its attempt (the longest tier past that). @default [1000, 10000, 60000]
   */
  retryTiersMs?: readonly number[];
  /** Exchange that receives dead letters (declared `direct`, routing key = the work queue). @default `<queue>.dlx` */
  deadLetterExchange?: string;
  /** Queue bound to the dead-letter exchange; `false` declares none (bind your own). @default `<queue>.dead` */
  deadLetterQueue?: string | false;
  /** Header read for the message id when `properties.messageId` is absent; `idOf` overrides both. @default 'message-id' */
  idHeader?: string;
  /** Reconnect delay after the n-th failed attempt (1-based), in ms. @default min(100 · 2^(n-1), 10000) with ±20 % jitter */
  reconnectDelayMs?: (attempt: number) => number;
  /** How long `stop()` waits for in-flight messages to settle, in ms. @default 30000 */
  stopTimeoutMs?: number;
}

/** The AMQP options after defaults, frozen. Inbox options are resolved by core. */
export interface ResolvedRabbitConsumerOptions
  extends ResolvedOptions<RabbitConsumerOptions, AdapterOptionKey<RabbitConsumerOptions>> {
  /** The inbox consumer name: the `consumer` option, else the queue. */
  readonly consumer: string;
}

/** Defaults of the AMQP options. */
export const DEFAULT_RABBIT_CONSUMER_OPTIONS = Object.freeze({
  assertQueue: true,
  queueType: 'quorum' as QueueType,
  prefetch: 20,
  concurrency: 1,
  batch: false,
  retryTiersMs: Object.freeze([1_000, 10_000, 60_000]),
  idHeader: 'message-id',
  reconnectDelayMs: (attempt: number) => {
    const base = Math.min(100 * 2 ** Math.max(0, attempt - 1), 10_000);
    return Math.round(base * (0.8 + Math.random() * 0.4));
  },
  stopTimeoutMs: 30_000,
});

type RabbitOptionKey = AdapterOptionKey<RabbitConsumerOptions>;

const RABBIT_KEYS = {
  url: true,
  socketOptions: true,
  queue: true,
  assertQueue: true,
  queueType: true,
  prefetch: true,
  concurrency: true,
  batch: true,
  batchSize: true,
  retryTiersMs: true,
  deadLetterExchange: true,
  deadLetterQueue: true,
  idHeader: true,
  reconnectDelayMs: true,
  stopTimeoutMs: true,
} as const satisfies Record<RabbitOptionKey, true>;

/**
 * Splits the options into the inbox's and the AMQP side's (refusing unknown keys and missing
 * required ones), applies the AMQP defaults and validates them, naming the first bad field.
 */
function resolveRabbitConsumerOptionsUnnamed<R>(options: RabbitConsumerOptions<R>): {
  rabbit: ResolvedRabbitConsumerOptions;
  inbox: Omit<RabbitConsumerOptions<R>, RabbitOptionKey>;
} {
  const { inbox, adapter } = splitOptions(options, {
    factory: 'createRabbitConsumer',
    adapterKeys: RABBIT_KEYS,
    required: ['url', 'queue'],
  });
  const o = withDefaults(DEFAULT_RABBIT_CONSUMER_OPTIONS, adapter);
  const url = o.url as unknown;
  if (!(typeof url === 'string' && /^amqps?:\/\//.test(url)) && !(typeof url === 'object' && url !== null)) {
    throw optionCheck.invalid(
      'url',
      `must be an amqp:// or amqps:// URL or amqplib connect options, got ${JSON.stringify(url)}`,
    );
  }
  const queue = optionCheck.name('queue', o.queue);
  const prefetch = optionCheck.integer('prefetch', o.prefetch, 1, 65_535);
  const tiers = o.retryTiersMs as unknown;
  if (!Array.isArray(tiers) || tiers.length === 0)
    throw optionCheck.invalid('retryTiersMs', 'must be a non-empty array of delays in ms');
  for (const [i, t] of tiers.entries()) optionCheck.durationMs(`retryTiersMs[${i}]`, t, 1);
  const deadLetterQueue =
    o.deadLetterQueue === false
      ? false
      : optionCheck.name('deadLetterQueue', o.deadLetterQueue ?? `${queue}.dead`);
  const consumer = optionCheck.consumerName(options.consumer, queue);
  const socketOptions = (o.socketOptions ?? {}) as SocketOptions;
  return {
    inbox,
    rabbit: Object.freeze({
      url: withHeartbeat(url as string | Options.Connect),
      socketOptions: {
        // amqplib's connect and handshake deadline: a broker path that went dark must not keep
        // a reconnect pending for good.
        timeout: CONNECT_TIMEOUT_MS,
        ...socketOptions,
        clientProperties: { connection_name: `once:${consumer}`, ...socketOptions.clientProperties },
      },
      queue,
      assertQueue: optionCheck.boolean('assertQueue', o.assertQueue),
      queueType: optionCheck.oneOf('queueType', o.queueType, ['quorum', 'classic']),
      prefetch,
      concurrency: optionCheck.integer('concurrency', o.concurrency),
      batch: optionCheck.boolean('batch', o.batch),
      batchSize: optionCheck.integer('batchSize', o.batchSize ?? prefetch),
      retryTiersMs: Object.freeze([...new Set(tiers as number[])].sort((a, b) => a - b)),
      deadLetterExchange: optionCheck.name('deadLetterExchange', o.deadLetterExchange ?? `${queue}.dlx`),
      deadLetterQueue,
      idHeader: optionCheck.name('idHeader', o.idHeader),
      reconnectDelayMs: optionCheck.function<(attempt: number) => number>(
        'reconnectDelayMs',
        o.reconnectDelayMs,
      ),
      stopTimeoutMs: optionCheck.durationMs('stopTimeoutMs', o.stopTimeoutMs),
      consumer,
    }),
  };
}

/**
 * Splits the options into the inbox's and the adapter's (refusing unknown keys and missing
 * required ones), applies the adapter's defaults and validates them; an error names
 * `createRabbitConsumer` and the first bad option.
 */
export function resolveRabbitConsumerOptions<R>(
  options: RabbitConsumerOptions<R>,
): ReturnType<typeof resolveRabbitConsumerOptionsUnnamed<R>> {
  return optionCheck.namingFactory('createRabbitConsumer', () =>
    resolveRabbitConsumerOptionsUnnamed(options),
  );
}
