import { ErrorCode, type Logger, OnceError, type OnceEventMap, type PgPoolLike } from '@once/core';

/**
 * Structural views of what {@link instrument} accepts, so that this package needs no adapter
 * as a dependency and a second copy of @once/core still fits. Each names only what is read.
 */

/** An `Inbox` from @once/core (`createInbox`). */
export interface InboxLike {
  /** The consumer name the inbox records under. */
  readonly consumer: string;
  /** What the gauges read: the pool, the schema and the logger. */
  readonly options: {
    /** The pool the database gauges read through, unless the `pool` option is given. */
    readonly pool: PgPoolLike;
    /** The schema the database gauges read, unless the `schema` option is given. */
    readonly schema: string;
    /** Where a failed gauge read is reported, unless the `logger` option is given. */
    readonly logger: Logger;
    /**
     * An inbox over several databases: each database's pool by name. The gauges are read from
     * each, tagged `db.namespace`, unless the `pool` option is given. Absent in older cores.
     */
    readonly routing?:
      | {
          /** Each database's pool, by name. */
          readonly pools: ReadonlyMap<string, PgPoolLike>;
        }
      | undefined;
  };
  /** Subscribes to an event; returns an unsubscribe function. */
  on<E extends keyof OnceEventMap>(name: E, listener: (event: OnceEventMap[E]) => void): () => void;
}

/** A `Relay` from @once/core (`createRelay`). */
export interface RelayLike {
  /** Subscribes to an event; returns an unsubscribe function. */
  on<E extends keyof OnceEventMap>(name: E, listener: (event: OnceEventMap[E]) => void): () => void;
  /** Runs one round; resolves with the rows published. */
  runOnce(): Promise<number>;
}

/** The `message:dead-lettered` event of @once/kafka's consumer (the adapter kit's shape). */
export interface KafkaDeadLetteredEvent {
  /** Where the message came from. */
  source: {
    /** The topic the message was read from: the dead-letter count's `messaging.destination.name`. */
    queue: string;
  };
  /** Why it was dead-lettered (`permanent`, `max-attempts`, `conflict`, ...). */
  reason: string;
  /** Where it went, or undefined when dead-lettering is off. */
  deadLetter: string | undefined;
}

/** A `KafkaConsumer` from @once/kafka. */
export interface KafkaConsumerLike {
  /** The consumer's inbox. */
  readonly inbox: InboxLike;
  /** The topics read. */
  readonly options: {
    /** The topics read; an array here is what tells a Kafka consumer apart. */
    readonly topics: readonly string[];
  };
  /** Subscribes to the adapter's event; returns an unsubscribe function. */
  on(name: 'message:dead-lettered', listener: (event: KafkaDeadLetteredEvent) => void): () => void;
}

/** The `message:dead-lettered` event of @once/sqs's consumer (the adapter kit's shape). */
export interface SqsDeadLetterEvent {
  /** Why it was dead-lettered (`permanent`, `max-attempts`, `conflict`, ...). */
  reason: string;
  /** The dead-letter queue's URL, the redrive target's ARN, or undefined when deleted. */
  deadLetter: string | undefined;
}

/** An `SqsConsumer` from @once/sqs. */
export interface SqsConsumerLike {
  /** The consumer's inbox. */
  readonly inbox: InboxLike;
  /** The queue read. */
  readonly options: {
    /** The URL of the queue read; its name is the dead-letter count's `messaging.destination.name`. */
    readonly queueUrl: string;
  };
  /** Subscribes to the adapter's event; returns an unsubscribe function. */
  on(name: 'message:dead-lettered', listener: (event: SqsDeadLetterEvent) => void): () => void;
}

/**
 * The `settled` event of @once/rabbitmq's consumer.
 * @deprecated no longer read: `once.dead_letters` comes from `message:dead-lettered`, as on the
 * other brokers ({@link RabbitDeadLetteredEvent}).
 */
export interface RabbitSettledEvent {
  /** The outcome's status. */
  status: string;
  /** What the broker was told (`ack`, `requeue`, `dead-letter`, ...). */
  plan: string;
}

/** The `message:dead-lettered` event of @once/rabbitmq's consumer (the adapter kit's shape). */
export interface RabbitDeadLetteredEvent {
  /** Why: `permanent`, `max-attempts`, `invalid-id`, `previously-failed`, `conflict`, ... */
  reason: string;
  /** The dead-letter exchange. */
  deadLetter: string | undefined;
}

/** A `RabbitConsumer` from @once/rabbitmq. */
export interface RabbitConsumerLike {
  /** The consumer's inbox. */
  readonly inbox: InboxLike;
  /** The queue read. */
  readonly options: {
    /** The queue read: the dead-letter count's `messaging.destination.name`. */
    readonly queue: string;
  };
  /** Subscribes to the adapter's event; returns an unsubscribe function. */
  on(name: 'message:dead-lettered', listener: (event: RabbitDeadLetteredEvent) => void): () => void;
}

/** The `message:dead-lettered` event of @once/nats's consumer (the adapter kit's shape). */
export interface NatsDeadLetteredEvent {
  /** Why it was dead-lettered (`permanent`, `max-attempts`, `conflict`, ...). */
  reason: string;
  /** The dead-letter subject, or undefined when dead-lettering is off (termed and logged). */
  deadLetter: string | undefined;
}

/** A `NatsConsumer` from @once/nats. */
export interface NatsConsumerLike {
  /** The consumer's inbox. */
  readonly inbox: InboxLike;
  /** The subject and durable read. */
  readonly options: {
    /** The subject consumed: the dead-letter count's `messaging.destination.name`. */
    readonly subject: string;
    /** The durable consumer's name; with `subject`, what tells a NATS consumer apart. */
    readonly durable: string;
  };
  /** Subscribes to the adapter's event; returns an unsubscribe function. */
  on(name: 'message:dead-lettered', listener: (event: NatsDeadLetteredEvent) => void): () => void;
}

/** Any consumer of another adapter: its inbox is instrumented, its own events are not read. */
export interface ConsumerLike {
  /** The consumer's inbox. */
  readonly inbox: InboxLike;
}

/** Everything {@link instrument} accepts. */
export type InstrumentTarget =
  | InboxLike
  | RelayLike
  | KafkaConsumerLike
  | SqsConsumerLike
  | RabbitConsumerLike
  | NatsConsumerLike
  | ConsumerLike;

/** Which kind of target this is; adapters are told apart by their resolved options. */
export type TargetKind =
  | { kind: 'inbox'; inbox: InboxLike }
  | { kind: 'relay'; relay: RelayLike }
  | { kind: 'kafka'; consumer: KafkaConsumerLike }
  | { kind: 'sqs'; consumer: SqsConsumerLike }
  | { kind: 'rabbitmq'; consumer: RabbitConsumerLike }
  | { kind: 'nats'; consumer: NatsConsumerLike }
  | { kind: 'consumer'; consumer: ConsumerLike };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** Tells a target's kind; throws INVALID_OPTION naming `target` for anything else. */
export function kindOf(target: InstrumentTarget): TargetKind {
  if (typeof target !== 'object' || target === null) return invalid(target);
  if ('inbox' in target) {
    const options: unknown = (target as { options?: unknown }).options;
    const o = isObject(options) ? options : {};
    if (typeof o.queueUrl === 'string') return { kind: 'sqs', consumer: target as SqsConsumerLike };
    if (Array.isArray(o.topics)) return { kind: 'kafka', consumer: target as KafkaConsumerLike };
    if (typeof o.subject === 'string' && typeof o.durable === 'string')
      return { kind: 'nats', consumer: target as NatsConsumerLike };
    if (typeof o.queue === 'string') return { kind: 'rabbitmq', consumer: target as RabbitConsumerLike };
    return { kind: 'consumer', consumer: target };
  }
  if ('consumer' in target) return { kind: 'inbox', inbox: target };
  if ('runOnce' in target) return { kind: 'relay', relay: target };
  return invalid(target);
}

function invalid(target: unknown): never {
  throw new OnceError(
    ErrorCode.InvalidOption,
    `instrument(target): target must be an Inbox, a Relay or an adapter consumer (with .inbox), got ${typeof target}`,
  );
}
