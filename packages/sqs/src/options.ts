import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Envelope, InboxOptions } from '@once/core';
import {
  type AdapterOptionKey,
  optionCheck,
  type ResolvedOptions,
  splitOptions,
  withDefaults,
} from '@once/core/adapter';

/**
 * Where the message id comes from (`idOf`, when given, overrides all).
 * - `header`: the message attribute named by `idHeader` (what once's publishers set).
 * - `deduplication-id`: the FIFO `MessageDeduplicationId`. Refused when the queue uses
 *   content-based deduplication: that id is a hash of the body meant for five minutes, and two
 *   genuinely separate messages with identical bodies must not collapse for days.
 * - `sqs-message-id`: SQS's own `MessageId`. It catches redeliveries of one send only, never a
 *   producer that sends the same thing twice.
 */
export type SqsIdSource = 'header' | 'deduplication-id' | 'sqs-message-id';

/** Options of {@link createSqsConsumer}: core's inbox options plus the SQS ones. */
export interface SqsConsumerOptions<R = unknown> extends Omit<InboxOptions<R>, 'consumer'> {
  /** The client to receive with (`new SQSClient({ region })`). Not destroyed by `stop()`. */
  client: SQSClient;
  /** The queue to consume. Checked with GetQueueAttributes at `start()`. */
  queueUrl: string;
  /** The name effects are recorded under in the inbox. @default the queue's name (the URL's last segment) */
  consumer?: string | undefined;
  /** Where the id comes from (see {@link SqsIdSource}); `idOf` overrides all. @default 'header' */
  idFrom?: SqsIdSource;
  /** The message attribute holding the id when `idFrom` is `header`. @default 'message-id' */
  idHeader?: string;
  /**
   * Where `failed` messages and rejected `conflict`s go: a copy with the `once-dead-letter` record
   * attribute is sent to this queue (FIFO: same group), then the original deleted. `false`: deleted
   * and logged (a recorded failure keeps its body in the inbox, `once failed list`; an invalid-id
   * message is kept nowhere). It must exist at `start()`. @default the queue's redrive policy when
   * it has one (made visible again at once; SQS moves it after `maxReceiveCount` receives), else
   * the queue `<name>-dead` (`<name>-dead.fifo` for a FIFO queue) beside it
   */
  deadLetterQueueUrl?: string | false | undefined;
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
   * group's (a receive's, in batch mode) settles are sent as soon as it is done anyway; on a FIFO
   * queue a group's deletes wait for that, its messages of the receive all done (SQS keeps the
   * group locked until the last is deleted), and go in one call. @default 20
   */
  settleLingerMs?: number;
  /** First delay after a failed receive, in ms; doubles up to `receiveBackoffMaxMs`. @default 200 */
  receiveBackoffMs?: number;
  /** Longest delay between failed receives, in ms. @default 10000 */
  receiveBackoffMaxMs?: number;
  /** Failed receives in a row after which `health()` reports unhealthy. @default 3 */
  unhealthyAfterErrors?: number;
  /** How long `stop()` waits for held messages to settle, in ms. @default 30000 */
  stopTimeoutMs?: number;
}

/** The SQS options after defaults, frozen. Inbox options are resolved by core. */
export interface ResolvedSqsConsumerOptions
  extends ResolvedOptions<
    SqsConsumerOptions,
    Exclude<AdapterOptionKey<SqsConsumerOptions>, 'deadLetterQueueUrl' | 'keyOf'>
  > {
  /** The inbox consumer name: the `consumer` option, else the queue's name. */
  readonly consumer: string;
  /** A dead-letter queue URL, `false`, or undefined: the redrive policy, else `<name>-dead` (decided at start). */
  readonly deadLetterQueueUrl: SqsConsumerOptions['deadLetterQueueUrl'];
  /** The `keyOf` given, as it is; undefined without one. */
  readonly keyOf: SqsConsumerOptions['keyOf'];
}

/** Defaults of the SQS options. */
export const DEFAULT_SQS_CONSUMER_OPTIONS = Object.freeze({
  idFrom: 'header' as SqsIdSource,
  idHeader: 'message-id',
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
  stopTimeoutMs: 30_000,
});

type SqsOptionKey = AdapterOptionKey<SqsConsumerOptions>;

const SQS_KEYS = {
  client: true,
  queueUrl: true,
  idFrom: true,
  idHeader: true,
  deadLetterQueueUrl: true,
  batch: true,
  keyOf: true,
  receivers: true,
  maxInFlight: true,
  concurrency: true,
  waitTimeSeconds: true,
  visibilityTimeoutS: true,
  heartbeat: true,
  heartbeatIntervalMs: true,
  maxHeldMs: true,
  settleLingerMs: true,
  receiveBackoffMs: true,
  receiveBackoffMaxMs: true,
  unhealthyAfterErrors: true,
  stopTimeoutMs: true,
} as const satisfies Record<SqsOptionKey, true>;

/** SQS refuses visibility past 12 hours from the receive. */
const MAX_VISIBILITY_S = 43_200;

function checkUrl(field: string, value: unknown): string {
  if (typeof value !== 'string' || !/^https?:\/\/\S+$/.test(value)) {
    throw optionCheck.invalid(field, `must be an http(s) queue URL, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** The queue's name: the last segment of its URL (`https://sqs…/123456789012/payments.fifo` → `payments.fifo`). */
export function queueNameOf(queueUrl: string): string {
  return new URL(queueUrl).pathname.split('/').filter(Boolean).pop() ?? '';
}

/**
 * Splits the options into the inbox's and the SQS side's (refusing unknown keys and missing
 * required ones), applies the SQS defaults and validates them, naming the first bad field.
 */
function resolveSqsConsumerOptionsUnnamed<R>(options: SqsConsumerOptions<R>): {
  sqs: ResolvedSqsConsumerOptions;
  inbox: Omit<SqsConsumerOptions<R>, SqsOptionKey>;
} {
  const { inbox, adapter } = splitOptions(options, {
    factory: 'createSqsConsumer',
    adapterKeys: SQS_KEYS,
    required: ['client', 'queueUrl'],
  });
  const o = withDefaults(DEFAULT_SQS_CONSUMER_OPTIONS, adapter);
  if (typeof (o.client as { send?: unknown }).send !== 'function')
    throw optionCheck.invalid('client', 'must be an SQSClient');
  const queueUrl = checkUrl('queueUrl', o.queueUrl);
  const dlq = o.deadLetterQueueUrl;
  if (dlq !== undefined && dlq !== false) {
    checkUrl('deadLetterQueueUrl', dlq);
    if (dlq === queueUrl) throw optionCheck.invalid('deadLetterQueueUrl', 'must not be the consumed queue');
  }
  if (o.keyOf !== undefined) optionCheck.function('keyOf', o.keyOf);
  const visibilityTimeoutS = optionCheck.integer(
    'visibilityTimeoutS',
    o.visibilityTimeoutS,
    1,
    MAX_VISIBILITY_S,
  );
  const heartbeat = optionCheck.boolean('heartbeat', o.heartbeat);
  const heartbeatIntervalMs = optionCheck.durationMs(
    'heartbeatIntervalMs',
    o.heartbeatIntervalMs ?? Math.max(100, Math.floor((visibilityTimeoutS * 1000) / 3)),
    50,
  );
  if (heartbeat && heartbeatIntervalMs >= visibilityTimeoutS * 1000) {
    throw optionCheck.invalid(
      'heartbeatIntervalMs',
      `must be shorter than visibilityTimeoutS (${visibilityTimeoutS} s)`,
    );
  }
  const receiveBackoffMs = optionCheck.durationMs('receiveBackoffMs', o.receiveBackoffMs, 1);
  const consumer = optionCheck.consumerName(options.consumer, () =>
    optionCheck.name('queueUrl', queueNameOf(queueUrl)),
  );
  return {
    inbox,
    sqs: Object.freeze({
      client: o.client,
      queueUrl,
      consumer,
      idFrom: optionCheck.oneOf('idFrom', o.idFrom, ['header', 'deduplication-id', 'sqs-message-id']),
      idHeader: optionCheck.name('idHeader', o.idHeader, 256),
      deadLetterQueueUrl: dlq,
      batch: optionCheck.boolean('batch', o.batch),
      keyOf: o.keyOf,
      receivers: optionCheck.integer('receivers', o.receivers, 1, 100),
      maxInFlight: optionCheck.integer('maxInFlight', o.maxInFlight),
      concurrency: optionCheck.integer('concurrency', o.concurrency),
      waitTimeSeconds: optionCheck.integer('waitTimeSeconds', o.waitTimeSeconds, 0, 20),
      visibilityTimeoutS,
      heartbeat,
      heartbeatIntervalMs,
      maxHeldMs: optionCheck.integer('maxHeldMs', o.maxHeldMs, 1, MAX_VISIBILITY_S * 1000),
      settleLingerMs: optionCheck.durationMs('settleLingerMs', o.settleLingerMs),
      receiveBackoffMs,
      receiveBackoffMaxMs: optionCheck.durationMs(
        'receiveBackoffMaxMs',
        o.receiveBackoffMaxMs,
        receiveBackoffMs,
      ),
      unhealthyAfterErrors: optionCheck.integer('unhealthyAfterErrors', o.unhealthyAfterErrors),
      stopTimeoutMs: optionCheck.durationMs('stopTimeoutMs', o.stopTimeoutMs),
    }),
  };
}

/**
 * Splits the options into the inbox's and the adapter's (refusing unknown keys and missing
 * required ones), applies the adapter's defaults and validates them; an error names
 * `createSqsConsumer` and the first bad option.
 */
export function resolveSqsConsumerOptions<R>(
  options: SqsConsumerOptions<R>,
): ReturnType<typeof resolveSqsConsumerOptionsUnnamed<R>> {
  return optionCheck.namingFactory('createSqsConsumer', () => resolveSqsConsumerOptionsUnnamed(options));
}
