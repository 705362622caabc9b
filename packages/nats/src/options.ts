import type { NatsConnection } from '@nats-io/transport-node';
import type { InboxOptions } from '@once/core';
import {
  type AdapterOptionKey,
  optionCheck,
  type ResolvedOptions,
  splitOptions,
  withDefaults,
} from '@once/core/adapter';

/** Where the message id comes from when `idOf` is not given. */
export type NatsIdFrom = 'header' | 'sequence';

/** Options of {@link createNatsConsumer}: the inbox's options plus the JetStream side. */
export interface NatsConsumerOptions<R = unknown> extends Omit<InboxOptions<R>, 'consumer'> {
  /** The name effects are recorded under in the inbox. @default durable */
  consumer?: string | undefined;
  /**
   * Servers once connects to (`nats://127.0.0.1:4222`); once then reconnects forever
   * (`maxReconnectAttempts: -1`). Give this or `connection`.
   */
  servers?: string | readonly string[];
  /**
   * A connection of your own (from `@nats-io/transport-node`'s `connect`). once never closes it;
   * when it closes, the consumer turns unhealthy with `NATS_CONNECTION_CLOSED`.
   */
  connection?: NatsConnection;
  /** The subject consumed: the durable consumer's filter subject (wildcards allowed). */
  subject: string;
  /** The stream holding `subject`. @default the stream that captures `subject` */
  stream?: string;
  /** The durable pull consumer's name. @default `consumer`, else `subject` with `.`, `*`, `>` made `_` */
  durable?: string;
  /**
   * Create the durable consumer when it does not exist (explicit acks, `max_deliver` −1,
   * `ack_wait` = `ackWaitMs`, `max_ack_pending` = `maxAckPending`). Off: it must exist, else
   * `NATS_CONSUMER_NOT_FOUND`. An existing consumer is checked, never changed. @default true
   */
  createConsumer?: boolean;
  /**
   * `ack_wait` of a consumer once creates, in ms. It must be above `handlerTimeoutMs`; held
   * messages are kept alive with `working()` every third of it. @default handlerTimeoutMs + 10000
   */
  ackWaitMs?: number;
  /**
   * `max_ack_pending` of a consumer once creates: messages handed out and not yet acked, across
   * every process sharing the durable. `1` keeps the stream's order, through naks too. @default 1000
   */
  maxAckPending?: number;
  /** Handlers (or batches) run at once. @default 1 */
  concurrency?: number;
  /** One transaction for the messages of a fetch waiting to run, instead of one per message. @default false */
  batch?: boolean;
  /** Messages per fetch, and per transaction with `batch`. @default 20 */
  batchSize?: number;
  /**
   * Where the id comes from: `'header'` (`idHeader`, by default `Nats-Msg-Id`, what JetStream
   * deduplicates publishes on) or `'sequence'` (the stream sequence: a re-publish of the same
   * message gets a new sequence, so it is one id per stored message, not per message). `idOf`
   * overrides both. @default 'header'
   */
  idFrom?: NatsIdFrom;
  /** The header holding the id. @default 'Nats-Msg-Id' */
  idHeader?: string;
  /**
   * Subject dead letters are published to (with JetStream, PubAck awaited, then `term()`); a
   * stream must capture it and the consumer must not receive it. `false`: `term()` and log only
   * (the inbox row keeps the message). @default `once.dead.<durable>`
   */
  deadLetterSubject?: string | false;
  /** How long `stop()` waits for in-flight messages to settle, in ms. @default 30000 */
  stopTimeoutMs?: number;
}

/** The JetStream options after defaults, frozen. Inbox options are resolved by core. */
export interface ResolvedNatsConsumerOptions
  extends ResolvedOptions<
    NatsConsumerOptions,
    Exclude<AdapterOptionKey<NatsConsumerOptions>, 'servers' | 'connection' | 'stream' | 'ackWaitMs'>
  > {
  /** The servers once connects to, as a list; empty when a `connection` was given. */
  readonly servers: readonly string[];
  /** The caller's own connection; undefined when once connects to `servers`. */
  readonly connection: NatsConsumerOptions['connection'];
  /** The stream given; undefined to use the stream that captures `subject`, looked up at start. */
  readonly stream: string | undefined;
  /**
   * The `ack_wait` given, in ms; undefined for the default (`handlerTimeoutMs` + 10000), worked out at start.
   */
  readonly ackWaitMs: number | undefined;
  /** The inbox consumer name: the `consumer` option, else the durable. */
  readonly consumer: string;
}

/** Defaults of the JetStream options. */
export const DEFAULT_NATS_CONSUMER_OPTIONS = Object.freeze({
  createConsumer: true,
  maxAckPending: 1_000,
  concurrency: 1,
  batch: false,
  batchSize: 20,
  idFrom: 'header' as NatsIdFrom,
  idHeader: 'Nats-Msg-Id',
  stopTimeoutMs: 30_000,
});

type NatsOptionKey = AdapterOptionKey<NatsConsumerOptions>;

const NATS_KEYS = {
  servers: true,
  connection: true,
  subject: true,
  stream: true,
  durable: true,
  createConsumer: true,
  ackWaitMs: true,
  maxAckPending: true,
  concurrency: true,
  batch: true,
  batchSize: true,
  idFrom: true,
  idHeader: true,
  deadLetterSubject: true,
  stopTimeoutMs: true,
} as const satisfies Record<NatsOptionKey, true>;

/** A JetStream name (stream, durable): no whitespace, `.`, `*`, `>`, path separators. */
function checkJsName(field: string, value: unknown): string {
  const name = optionCheck.name(field, value);
  if (/[\s.*>/\\]/.test(name)) {
    throw optionCheck.invalid(
      field,
      `must be a JetStream name (no whitespace, '.', '*', '>', '/', '\\'), got '${name}'`,
    );
  }
  return name;
}

/** A subject: tokens split by `.`, none empty, no whitespace. */
function checkSubject(field: string, value: unknown): string {
  const s = optionCheck.name(field, value);
  if (/\s/.test(s) || s.split('.').some((t) => t.length === 0)) {
    throw optionCheck.invalid(
      field,
      `must be a NATS subject (dot-separated tokens, no whitespace), got '${s}'`,
    );
  }
  return s;
}

/**
 * Splits the options into the inbox's and the JetStream side's (refusing unknown keys and missing
 * required ones), applies the defaults and validates them, naming the first bad field.
 */
function resolveNatsConsumerOptionsUnnamed<R>(options: NatsConsumerOptions<R>): {
  nats: ResolvedNatsConsumerOptions;
  inbox: Omit<NatsConsumerOptions<R>, NatsOptionKey>;
} {
  const { inbox, adapter } = splitOptions(options, {
    factory: 'createNatsConsumer',
    adapterKeys: NATS_KEYS,
    required: ['subject'],
  });
  const o = withDefaults(DEFAULT_NATS_CONSUMER_OPTIONS, adapter);
  if ((o.servers === undefined) === (o.connection === undefined)) {
    throw optionCheck.invalid(
      'servers',
      'give either servers (once connects) or connection (your own), not both or neither',
    );
  }
  const servers = o.servers === undefined ? [] : typeof o.servers === 'string' ? [o.servers] : [...o.servers];
  for (const [i, s] of servers.entries()) optionCheck.name(`servers[${i}]`, s);
  const connection = o.connection as unknown;
  if (
    connection !== undefined &&
    (typeof connection !== 'object' || connection === null || !('closed' in connection))
  ) {
    throw optionCheck.invalid('connection', 'must be a NatsConnection from @nats-io/transport-node');
  }
  const subject = checkSubject('subject', o.subject);
  const durable =
    o.durable !== undefined
      ? checkJsName('durable', o.durable)
      : options.consumer !== undefined
        ? checkJsName('durable', options.consumer.replace(/[\s.*>/\\]/g, '_'))
        : subject.replace(/[\s.*>/\\]/g, '_');
  const consumer = optionCheck.consumerName(options.consumer, durable);
  const batchSize = optionCheck.integer('batchSize', o.batchSize, 1, 10_000);
  return {
    inbox,
    nats: Object.freeze({
      servers: Object.freeze(servers),
      connection: o.connection,
      subject,
      stream: o.stream === undefined ? undefined : checkJsName('stream', o.stream),
      durable,
      createConsumer: optionCheck.boolean('createConsumer', o.createConsumer),
      ackWaitMs:
        o.ackWaitMs === undefined ? undefined : optionCheck.durationMs('ackWaitMs', o.ackWaitMs, 1_000),
      maxAckPending: optionCheck.integer('maxAckPending', o.maxAckPending, 1),
      concurrency: optionCheck.integer('concurrency', o.concurrency),
      batch: optionCheck.boolean('batch', o.batch),
      batchSize,
      idFrom: optionCheck.oneOf('idFrom', o.idFrom, ['header', 'sequence']),
      idHeader: optionCheck.name('idHeader', o.idHeader),
      deadLetterSubject:
        o.deadLetterSubject === false
          ? false
          : checkSubject('deadLetterSubject', o.deadLetterSubject ?? `once.dead.${durable}`),
      stopTimeoutMs: optionCheck.durationMs('stopTimeoutMs', o.stopTimeoutMs),
      consumer,
    }),
  };
}

/**
 * Splits the options into the inbox's and the adapter's (refusing unknown keys and missing
 * required ones), applies the adapter's defaults and validates them; an error names
 * `createNatsConsumer` and the first bad option.
 */
export function resolveNatsConsumerOptions<R>(
  options: NatsConsumerOptions<R>,
): ReturnType<typeof resolveNatsConsumerOptionsUnnamed<R>> {
  return optionCheck.namingFactory('createNatsConsumer', () => resolveNatsConsumerOptionsUnnamed(options));
}
