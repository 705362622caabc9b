import {
  checkNumber,
  type Envelope,
  ErrorCode,
  type IdOf,
  type InboxOptions,
  type Logger,
  OnceError,
  silentLogger,
} from '@once/core';
import type { Options } from 'amqplib';
import type { SocketOptionsLike as SocketOptions } from './socket-options.js';

/** RabbitMQ queue types; quorum is recommended (replicated, and safe under partitions: docs/pitfalls.md R4). */
export type QueueType = 'quorum' | 'classic';

/** Options of {@link createRabbitConsumer}: the inbox's options plus the AMQP side. */
export interface RabbitConsumerOptions<R = unknown> extends InboxOptions<R> {
  /** AMQP URL (`amqp://user:pass@host:5672/vhost`) or amqplib connect options. */
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
  /**
   * Redeliveries of an unsettled message (its consumer died or lost its channel) before it is
   * dead-lettered without running: the guard against a message that kills the process every time.
   * @default 5
   */
  maxRedeliveries?: number;
  /** Header read for the message id when `properties.messageId` is absent. @default 'message-id' */
  idHeader?: string;
  /** Reconnect delay after the n-th failed attempt (1-based), in ms. @default min(100 · 2^(n-1), 10000) with ±20 % jitter */
  reconnectDelayMs?: (attempt: number) => number;
  /** How long `stop()` waits for in-flight messages to settle, in ms. @default 30000 */
  stopTimeoutMs?: number;
}

/** Options after defaults, frozen. */
export interface ResolvedRabbitOptions {
  readonly url: string | Options.Connect;
  readonly socketOptions: SocketOptions;
  readonly queue: string;
  readonly assertQueue: boolean;
  readonly queueType: QueueType;
  readonly prefetch: number;
  readonly concurrency: number;
  readonly batch: boolean;
  readonly batchSize: number;
  readonly retryTiersMs: readonly number[];
  readonly deadLetterExchange: string;
  readonly deadLetterQueue: string | false;
  readonly maxRedeliveries: number;
  readonly idHeader: string;
  readonly reconnectDelayMs: (attempt: number) => number;
  readonly stopTimeoutMs: number;
  readonly logger: Logger;
}

export const DEFAULT_RABBIT_OPTIONS = Object.freeze({
  assertQueue: true,
  queueType: 'quorum' as QueueType,
  prefetch: 20,
  concurrency: 1,
  batch: false,
  retryTiersMs: Object.freeze([1_000, 10_000, 60_000]),
  maxRedeliveries: 5,
  idHeader: 'message-id',
  reconnectDelayMs: (attempt: number) => {
    const base = Math.min(100 * 2 ** Math.max(0, attempt - 1), 10_000);
    return Math.round(base * (0.8 + Math.random() * 0.4));
  },
  stopTimeoutMs: 30_000,
});

const RABBIT_KEYS = [
  'url',
  'socketOptions',
  'queue',
  'assertQueue',
  'queueType',
  'prefetch',
  'concurrency',
  'batch',
  'batchSize',
  'retryTiersMs',
  'deadLetterExchange',
  'deadLetterQueue',
  'maxRedeliveries',
  'idHeader',
  'reconnectDelayMs',
  'stopTimeoutMs',
] as const;

function invalid(field: string, message: string): OnceError {
  return new OnceError(ErrorCode.InvalidOption, `options.${field} ${message}`);
}

function checkName(field: string, value: unknown, allowEmpty = false): string {
  if (typeof value !== 'string' || (!allowEmpty && value.length === 0) || value.length > 255) {
    throw invalid(
      field,
      `must be a ${allowEmpty ? '' : 'non-empty '}string of at most 255 characters, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** Splits the consumer's options into the inbox's and the AMQP side's, validating the latter. */
export function resolveRabbitOptions<R>(options: RabbitConsumerOptions<R>): {
  rabbit: ResolvedRabbitOptions;
  inbox: InboxOptions<R>;
} {
  if (typeof options !== 'object' || options === null) throw invalid('', 'must be an object');
  const inbox: Record<string, unknown> = { ...options };
  for (const k of RABBIT_KEYS) delete inbox[k];
  const o = { ...DEFAULT_RABBIT_OPTIONS, ...stripUndefined(options) };
  const url = o.url as unknown;
  if (!(typeof url === 'string' && /^amqps?:\/\//.test(url)) && !(typeof url === 'object' && url !== null)) {
    throw invalid(
      'url',
      `must be an amqp:// or amqps:// URL or amqplib connect options, got ${JSON.stringify(url)}`,
    );
  }
  const queue = checkName('queue', o.queue);
  if (typeof o.assertQueue !== 'boolean') throw invalid('assertQueue', 'must be a boolean');
  if (typeof o.batch !== 'boolean') throw invalid('batch', 'must be a boolean');
  if (o.queueType !== 'quorum' && o.queueType !== 'classic') {
    throw invalid('queueType', `must be 'quorum' or 'classic', got ${JSON.stringify(o.queueType)}`);
  }
  const prefetch = checkNumber('prefetch', o.prefetch, 1);
  if (prefetch > 65_535) throw invalid('prefetch', `must be at most 65535, got ${prefetch}`);
  const batchSize = checkNumber('batchSize', o.batchSize ?? prefetch, 1);
  const tiers = o.retryTiersMs as unknown;
  if (!Array.isArray(tiers) || tiers.length === 0)
    throw invalid('retryTiersMs', 'must be a non-empty array of delays in ms');
  for (const [i, t] of tiers.entries()) checkNumber(`retryTiersMs[${i}]`, t, 1);
  if (typeof o.reconnectDelayMs !== 'function') throw invalid('reconnectDelayMs', 'must be a function');
  const deadLetterQueue =
    o.deadLetterQueue === false ? false : checkName('deadLetterQueue', o.deadLetterQueue ?? `${queue}.dead`);
  const logger = (options.logger ?? silentLogger) as Logger;
  const socketOptions = (o.socketOptions ?? {}) as SocketOptions;
  const consumerName = typeof options.consumer === 'string' ? options.consumer : '?';
  return {
    inbox: inbox as unknown as InboxOptions<R>,
    rabbit: Object.freeze({
      url: url as string | Options.Connect,
      socketOptions: {
        ...socketOptions,
        clientProperties: { connection_name: `once:${consumerName}`, ...socketOptions.clientProperties },
      },
      queue,
      assertQueue: o.assertQueue,
      queueType: o.queueType,
      prefetch,
      concurrency: checkNumber('concurrency', o.concurrency, 1),
      batch: o.batch,
      batchSize,
      retryTiersMs: Object.freeze([...new Set(tiers as number[])].sort((a, b) => a - b)),
      deadLetterExchange: checkName('deadLetterExchange', o.deadLetterExchange ?? `${queue}.dlx`),
      deadLetterQueue,
      maxRedeliveries: checkNumber('maxRedeliveries', o.maxRedeliveries, 1),
      idHeader: checkName('idHeader', o.idHeader),
      reconnectDelayMs: o.reconnectDelayMs,
      stopTimeoutMs: checkNumber('stopTimeoutMs', o.stopTimeoutMs, 0),
      logger,
    }),
  };
}

/** The id rule of the issue: `properties.messageId` (in `envelope.id`), else the user's `idOf`. */
export function idOfWithFallback(idOf: IdOf | undefined): IdOf | undefined {
  if (!idOf) return undefined;
  return (e: Envelope) => e.id ?? idOf(e);
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
