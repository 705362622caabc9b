import type { SQSClient } from '@aws-sdk/client-sqs';
import {
  checkNumber,
  type Envelope,
  type Handler,
  type InboxOptions,
  type Logger,
  OnceError,
  resolveInboxOptions,
  silentLogger,
} from '@once/core';

/**
 * Where the message id comes from.
 * - `attribute`: the message attribute named by `idAttribute` (what once's publishers set).
 * - `deduplication-id`: the FIFO `MessageDeduplicationId`. Refused when the queue uses
 *   content-based deduplication: that id is a hash of the body meant for five minutes, and two
 *   genuinely separate messages with identical bodies must not collapse for days.
 * - `sqs-message-id`: SQS's own `MessageId`. It catches redeliveries of one send only, never a
 *   producer that sends the same thing twice.
 */
export type IdSource = 'attribute' | 'deduplication-id' | 'sqs-message-id';

/**
 * What happens to a message that ends `failed` (poison, invalid id) or `conflict` under `reject`.
 * - `{ queueUrl }`: send a copy there with the `once-dead-letter` record attribute, then delete it.
 * - `'redrive'`: leave it; the queue's redrive policy moves it after `maxReceiveCount` receives.
 * - `'discard'`: delete it (the inbox keeps the body of a recorded failure; an invalid-id
 *   message is not recorded anywhere, so it is lost).
 */
export type DeadLetter = { queueUrl: string } | 'redrive' | 'discard';

/** Options of {@link createSqsConsumer}: core's inbox options plus the SQS ones. */
export interface SqsConsumerOptions<R = unknown> extends Omit<InboxOptions<R>, 'handler'> {
  /** The client to receive with (`new SQSClient({ region })`). Not destroyed by `stop()`. */
  client: SQSClient;
  /** The queue to consume. Checked with GetQueueAttributes at `start()`. */
  queueUrl: string;
  /** The message handler; its writes go through `ctx.tx`. */
  handler: Handler<R>;
  /** Where the id comes from (see {@link IdSource}); `idOf` overrides all. @default 'attribute' */
  idFrom?: IdSource;
  /** The message attribute holding the id when `idFrom` is `attribute`. @default 'message-id' */
  idAttribute?: string;
  /** Dead-letter policy. @default 'redrive' when the queue has a redrive policy, else start() refuses to guess */
  deadLetter?: DeadLetter | undefined;
  /** One Postgres transaction per received batch (group order kept) instead of one per message. @default false */
  batch?: boolean;
  /**
   * With `batch`: the key of the rows a message's handler writes (an account id, say), or
   * undefined when there is none. Messages with one key never run in two transactions at once, so
   * concurrent batches never lock one row in different orders, and never deadlock on it (40P01).
   * On a standard queue batches then form by key, in `maxInFlight / 20` lanes (at least 1, at
   * most `concurrency`) of one batch at a time, a key in one lane while it has messages there. On
   * FIFO queues the message group is always such a key; `keyOf` adds its key beside it, for rows
   * shared across groups, and a batch holding a key waits for the batch in flight that holds it.
   * A throwing `keyOf` counts as undefined. Ignored without `batch`. @default none
   */
  keyOf?: ((envelope: Envelope) => string | undefined) | undefined;
  /** ReceiveMessage calls in flight at once; one is usually best (see the SQS guide). @default 1 */
  receivers?: number;
  /** Messages held at once (received, not yet settled); receives wait below it. @default 50 */
  maxInFlight?: number;
  /** Handlers (or batch transactions) running at once; keep it at or below the pool's size. @default 10 */
  concurrency?: number;
  /** Long-poll wait of each receive, in seconds (0–20). @default 20 */
  waitTimeSeconds?: number;
  /** Visibility given at receive and by each heartbeat extension, in seconds. @default 30 */
  visibilityTimeoutS?: number;
  /** Extend visibility while messages are held. @default true */
  heartbeat?: boolean;
  /** How often the heartbeat runs, in ms. @default visibilityTimeoutS · 1000 / 3 */
  heartbeatIntervalMs?: number;
  /** Longest a message is held and extended, from its receipt, in ms (at most 12 h); past it, it is let go. @default 900000 (15 min) */
  maxHeldMs?: number;
  /**
   * Longest a delete or visibility change waits for others to share its batch call, in ms. A
   * group's (a receive's, in batch mode) settles are sent as soon as it is done anyway. @default 20
   */
  settleLingerMs?: number;
  /** First delay after a failed receive, in ms; doubles up to `receiveBackoffMaxMs`. @default 200 */
  receiveBackoffMs?: number;
  /** Longest delay between failed receives, in ms. @default 10000 */
  receiveBackoffMaxMs?: number;
  /** Failed receives in a row after which `health()` reports unhealthy. @default 3 */
  unhealthyAfterErrors?: number;
}

/** Options after defaults, frozen. */
export interface ResolvedSqsConsumerOptions<R = unknown> {
  readonly client: SQSClient;
  readonly queueUrl: string;
  readonly inbox: InboxOptions<R>;
  readonly idFrom: IdSource;
  readonly idAttribute: string;
  readonly deadLetter: DeadLetter | undefined;
  readonly batch: boolean;
  readonly keyOf: ((envelope: Envelope) => string | undefined) | undefined;
  readonly receivers: number;
  readonly maxInFlight: number;
  readonly concurrency: number;
  readonly waitTimeSeconds: number;
  readonly visibilityTimeoutS: number;
  readonly heartbeat: boolean;
  readonly heartbeatIntervalMs: number;
  readonly maxHeldMs: number;
  readonly settleLingerMs: number;
  readonly receiveBackoffMs: number;
  readonly receiveBackoffMaxMs: number;
  readonly unhealthyAfterErrors: number;
  readonly maxAttempts: number;
  readonly logger: Logger;
}

/** The defaults of {@link SqsConsumerOptions}. */
export const DEFAULT_SQS_CONSUMER_OPTIONS = Object.freeze({
  idFrom: 'attribute' as IdSource,
  idAttribute: 'message-id',
  batch: false,
  receivers: 1,
  maxInFlight: 50,
  concurrency: 10,
  waitTimeSeconds: 20,
  visibilityTimeoutS: 30,
  heartbeat: true,
  maxHeldMs: 15 * 60_000,
  settleLingerMs: 20,
  receiveBackoffMs: 200,
  receiveBackoffMaxMs: 10_000,
  unhealthyAfterErrors: 3,
});

const SQS_KEYS = [
  'client',
  'queueUrl',
  'idFrom',
  'idAttribute',
  'deadLetter',
  'batch',
  'keyOf',
  'receivers',
  'maxInFlight',
  'concurrency',
  'waitTimeSeconds',
  'visibilityTimeoutS',
  'heartbeat',
  'heartbeatIntervalMs',
  'maxHeldMs',
  'settleLingerMs',
  'receiveBackoffMs',
  'receiveBackoffMaxMs',
  'unhealthyAfterErrors',
] as const;

function invalid(field: string, message: string): OnceError {
  return new OnceError('INVALID_OPTION', `options.${field} ${message}`);
}

function checkMax(field: string, value: number, max: number): number {
  if (value > max) throw invalid(field, `must be at most ${max}, got ${value}`);
  return value;
}

function checkUrl(field: string, value: unknown): string {
  if (typeof value !== 'string' || !/^https?:\/\/\S+$/.test(value)) {
    throw invalid(field, `must be an http(s) queue URL, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** Applies defaults and validates every field, naming the first bad one (OnceError INVALID_OPTION). */
export function resolveSqsConsumerOptions<R>(options: SqsConsumerOptions<R>): ResolvedSqsConsumerOptions<R> {
  if (typeof options !== 'object' || options === null) throw invalid('', 'must be an object');
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const o = { ...DEFAULT_SQS_CONSUMER_OPTIONS, ...defined } as SqsConsumerOptions<R> &
    typeof DEFAULT_SQS_CONSUMER_OPTIONS;
  const client = o.client as { send?: unknown } | undefined;
  if (!client || typeof client.send !== 'function') throw invalid('client', 'must be an SQSClient');
  const queueUrl = checkUrl('queueUrl', o.queueUrl);
  if (!['attribute', 'deduplication-id', 'sqs-message-id'].includes(o.idFrom)) {
    throw invalid(
      'idFrom',
      `must be 'attribute', 'deduplication-id' or 'sqs-message-id', got ${JSON.stringify(o.idFrom)}`,
    );
  }
  if (typeof o.idAttribute !== 'string' || o.idAttribute.length === 0 || o.idAttribute.length > 256) {
    throw invalid('idAttribute', `must be a non-empty attribute name, got ${JSON.stringify(o.idAttribute)}`);
  }
  const deadLetter = o.deadLetter;
  if (deadLetter !== undefined && deadLetter !== 'redrive' && deadLetter !== 'discard') {
    if (typeof deadLetter !== 'object' || deadLetter === null) {
      throw invalid(
        'deadLetter',
        `must be { queueUrl }, 'redrive' or 'discard', got ${JSON.stringify(deadLetter)}`,
      );
    }
    checkUrl('deadLetter.queueUrl', deadLetter.queueUrl);
    if (deadLetter.queueUrl === queueUrl)
      throw invalid('deadLetter.queueUrl', 'must not be the consumed queue');
  }
  for (const field of ['batch', 'heartbeat'] as const) {
    if (typeof o[field] !== 'boolean')
      throw invalid(field, `must be a boolean, got ${JSON.stringify(o[field])}`);
  }
  if (o.keyOf !== undefined && typeof o.keyOf !== 'function') {
    throw invalid('keyOf', `must be a function (envelope) => string | undefined, got ${typeof o.keyOf}`);
  }
  const visibilityTimeoutS = checkMax(
    'visibilityTimeoutS',
    checkNumber('visibilityTimeoutS', o.visibilityTimeoutS, 1),
    43_200,
  );
  const heartbeatIntervalMs = checkNumber(
    'heartbeatIntervalMs',
    o.heartbeatIntervalMs ?? Math.max(100, Math.floor((visibilityTimeoutS * 1000) / 3)),
    50,
  );
  if (o.heartbeat && heartbeatIntervalMs >= visibilityTimeoutS * 1000) {
    throw invalid('heartbeatIntervalMs', `must be shorter than visibilityTimeoutS (${visibilityTimeoutS} s)`);
  }
  const receiveBackoffMs = checkNumber('receiveBackoffMs', o.receiveBackoffMs, 1);
  const { handler: _h, ...rest } = o;
  const inbox = Object.fromEntries(
    Object.entries(rest).filter(
      ([k]) => !(SQS_KEYS as readonly string[]).includes(k) && !(k in DEFAULT_SQS_CONSUMER_OPTIONS),
    ),
  ) as Omit<InboxOptions<R>, 'handler'>;
  // Validate core's options now so a bad field is named at construction, not at the first message.
  const core = resolveInboxOptions({ ...inbox, handler: o.handler });
  return Object.freeze({
    client: o.client,
    queueUrl,
    inbox: { ...inbox, handler: o.handler },
    idFrom: o.idFrom,
    idAttribute: o.idAttribute,
    deadLetter,
    batch: o.batch,
    keyOf: o.keyOf,
    receivers: checkMax('receivers', checkNumber('receivers', o.receivers, 1), 100),
    maxInFlight: checkNumber('maxInFlight', o.maxInFlight, 1),
    concurrency: checkNumber('concurrency', o.concurrency, 1),
    waitTimeSeconds: checkMax('waitTimeSeconds', checkNumber('waitTimeSeconds', o.waitTimeSeconds, 0), 20),
    visibilityTimeoutS,
    heartbeat: o.heartbeat,
    heartbeatIntervalMs,
    // SQS refuses to extend visibility past 12 hours from the receive.
    maxHeldMs: checkMax('maxHeldMs', checkNumber('maxHeldMs', o.maxHeldMs, 1), 43_200_000),
    settleLingerMs: checkNumber('settleLingerMs', o.settleLingerMs, 0),
    receiveBackoffMs,
    receiveBackoffMaxMs: checkNumber('receiveBackoffMaxMs', o.receiveBackoffMaxMs, receiveBackoffMs),
    unhealthyAfterErrors: checkNumber('unhealthyAfterErrors', o.unhealthyAfterErrors, 1),
    maxAttempts: core.maxAttempts,
    logger: core.logger ?? silentLogger,
  });
}
