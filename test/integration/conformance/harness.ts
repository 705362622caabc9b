import {
  type Envelope,
  type Handler,
  type HandlerContext,
  type Inbox,
  type InboxOptions,
  migrate,
} from '@once/core';
import { type DeadLetterRecord, decodeDeadLetterRecord } from '@once/core/adapter';
import type pg from 'pg';
import {
  createLedger,
  createTestPool,
  dropSchema,
  freshSchemaName,
  type Ledger,
} from '../../support/index.js';

// The contract every broker adapter is held to. A harness hides how one broker creates a
// destination, publishes, consumes and dead-letters; the scenarios (the *.test.ts files here)
// only speak this interface, so the same assertions run against Kafka, SQS and RabbitMQ.

/** The brokers the suite covers. */
export type BrokerName = 'kafka' | 'sqs' | 'rabbitmq' | 'nats';

/** One message to publish. */
export interface OutMessage {
  /**
   * The message id, set where once's publishers set it (header, attribute, `messageId`).
   * Raw bytes (a Buffer) go into the `message-id` header on Kafka and RabbitMQ (amqplib's
   * `messageId` is a string); left out, the message carries no id at all.
   */
  readonly id?: string | Buffer | undefined;
  /** Kafka partition key, SQS message group, AMQP routing key. */
  readonly key: string;
  /** The body; SQS bodies are text, so a Buffer is sent there as UTF-8. */
  readonly body: string | Buffer;
  /** More headers (Kafka), message attributes (SQS, as String) or AMQP headers. @default none */
  readonly headers?: Readonly<Record<string, string | Buffer>> | undefined;
  /**
   * RabbitMQ: put the id in the `message-id` header instead of the `messageId` property (which
   * holds at most 255 bytes). Kafka and SQS carry the id there anyway. @default false
   */
  readonly idInHeader?: boolean | undefined;
}

/** A fresh topic or queue (with its dead-letter destination), named uniquely for this run. */
export interface Destination {
  readonly name: string;
}

/** What was dead-lettered, as each broker's copy says it. */
export interface DeadLetterCopy {
  readonly id: string | undefined;
  /** once's failure reason (`permanent`, `max-attempts`, ...), from the copy's headers. */
  readonly reason: string | undefined;
}

/** A dead-letter copy read in full: its body and why it failed, as the broker carries it. */
export interface DeadLetterDetail extends DeadLetterCopy {
  /** The copy's body, byte for byte. */
  readonly body: Buffer;
  /** The id as raw bytes where the broker keeps bytes (Kafka and AMQP headers), else its text. */
  readonly rawId: Buffer | undefined;
  /** The error as the copy says it (the unified record's, else the adapter's own headers). */
  readonly error:
    | {
        readonly name?: string | undefined;
        readonly message?: string | undefined;
        readonly code?: string | undefined;
      }
    | undefined;
  /** core's `once-dead-letter` record, when the adapter attaches it. */
  readonly record: DeadLetterRecord | undefined;
}

/**
 * Consumer settings a scenario may change, in the suite's own words; each harness maps them to
 * its adapter (e.g. a retry delay is core's `retryDelayMs` and, on RabbitMQ, a retry tier).
 */
export interface SuiteConsumerOptions {
  /** core's `maxAttempts`. */
  readonly maxAttempts?: number;
  /** A constant retry delay in ms (core's `retryDelayMs`, RabbitMQ's single retry tier). */
  readonly retryDelayMs?: number;
  readonly idOf?: InboxOptions['idOf'];
  readonly fingerprintOf?: (envelope: Envelope) => Buffer | string;
  readonly storeResult?: boolean;
  readonly failedBodyMaxBytes?: number;
  /** One transaction for several messages (Kafka `processing: 'batch'`, SQS and AMQP `batch`). */
  readonly batch?: boolean;
  /** Lease mode (core's `mode: 'lease'`) with this `leaseMs`; transaction mode when unset. */
  readonly leaseMs?: number;
  /** core's `logger`. @default the harness's: none (failure lines to the console) */
  readonly logger?: InboxOptions['logger'];
}

/** core's inbox options for `o`, shared by the harnesses. */
export function inboxOptionsOf(o: SuiteConsumerOptions | undefined): Partial<InboxOptions> {
  if (!o) return {};
  const delay = o.retryDelayMs;
  return {
    ...(o.maxAttempts === undefined ? {} : { maxAttempts: o.maxAttempts }),
    ...(delay === undefined ? {} : { retryDelayMs: () => delay }),
    ...(o.idOf === undefined ? {} : { idOf: o.idOf }),
    ...(o.fingerprintOf === undefined ? {} : { fingerprintOf: o.fingerprintOf }),
    ...(o.storeResult === undefined ? {} : { storeResult: o.storeResult }),
    ...(o.failedBodyMaxBytes === undefined ? {} : { failedBodyMaxBytes: o.failedBodyMaxBytes }),
    ...(o.leaseMs === undefined ? {} : { mode: { lease: { leaseMs: o.leaseMs } } }),
    ...(o.logger === undefined ? {} : { logger: o.logger }),
  };
}

/** The error a dead-letter copy carries, from core's shared record (the same on every broker). */
export function deadLetterWhy(
  record: string | Buffer | undefined,
): Pick<DeadLetterDetail, 'reason' | 'error' | 'record'> {
  const r = decodeDeadLetterRecord(record);
  return r
    ? { reason: r.reason, error: r.error, record: r }
    : { reason: undefined, error: {}, record: undefined };
}

/** What a scenario asks of a consumer. */
export interface ConsumerSpec {
  /** The inbox consumer name (and, for Kafka, the group): two specs with one name compete. */
  readonly consumer: string;
  readonly handler: Handler;
  /** Called with the consumer's inbox before it starts, so no event is missed. @default none */
  readonly listen?: (inbox: Pick<Inbox, 'on'>) => void;
  /** Settings other than the harness's test-friendly defaults. @default none */
  readonly options?: SuiteConsumerOptions;
}

/** A started in-process consumer. */
export interface RunningConsumer {
  /** The adapter's inbox, for its per-message events. */
  readonly inbox: Pick<Inbox, 'on'>;
  /** A graceful stop; idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts `consumer` for a suite: tracked in `running` (so `close()` stops what a test left), its
 * inbox shown to `spec.listen` before the first message, and a handle whose `stop()` untracks it.
 */
export async function startTracked<C extends { inbox: Inbox; start(): Promise<void>; stop(): Promise<void> }>(
  consumer: C,
  spec: ConsumerSpec,
  running: Set<C>,
): Promise<RunningConsumer> {
  running.add(consumer);
  spec.listen?.(consumer.inbox);
  await consumer.start();
  return {
    inbox: consumer.inbox,
    async stop() {
      running.delete(consumer);
      await consumer.stop();
    },
  };
}

/** Settings a consumer child process needs to build the same consumer (see fixtures/consumer-child.mjs). */
export type ChildConfig = Readonly<Record<string, unknown>>;

/** One broker, behind the suite's contract. */
export interface BrokerHarness {
  readonly broker: BrokerName;
  /** Creates a fresh destination and its dead-letter destination. */
  create(prefix: string): Promise<Destination>;
  /** Publishes in order and resolves once the broker acknowledged every message. */
  publish(dest: Destination, messages: readonly OutMessage[]): Promise<void>;
  /** Starts a consumer of the adapter's own factory, with test-friendly settings. */
  start(dest: Destination, spec: ConsumerSpec): Promise<RunningConsumer>;
  /**
   * True when all of `running` have their share of the destination at once (Kafka: each owns
   * partitions and together they own all, without overlap; SQS and RabbitMQ: always, as any
   * started consumer receives).
   */
  balanced(dest: Destination, running: readonly RunningConsumer[]): boolean;
  /**
   * True when every published message was settled by consumer `consumer` (Kafka: committed to the
   * end; SQS: deleted; RabbitMQ: acked, i.e. nothing ready and, of running consumers, nothing unacked).
   */
  settled(dest: Destination, consumer: string): Promise<boolean>;
  /** Reads (and removes) what was dead-lettered, waiting up to `timeoutMs` for `count` copies. */
  deadLetters(dest: Destination, count: number, timeoutMs?: number): Promise<DeadLetterCopy[]>;
  /** {@link deadLetters} with bodies and errors. */
  deadLetterDetails(dest: Destination, count: number, timeoutMs?: number): Promise<DeadLetterDetail[]>;
  /** The adapter's `jsonHandler`, if it exports one. */
  readonly jsonHandler:
    | (<T>(handler: (value: T, envelope: Envelope, ctx: HandlerContext) => Promise<unknown>) => Handler)
    | undefined;
  /** What fixtures/consumer-child.mjs needs to run consumer `consumer` on `dest`. */
  childConfig(dest: Destination, consumer: string): ChildConfig;
  /** Stops what is still running, deletes every destination created, closes clients. */
  close(): Promise<void>;
}

/** The database side of a conformance file: once's tables in a schema of its own, and ledgers. */
export interface ConformanceDb {
  readonly pool: pg.Pool;
  /** The schema once's tables live in. */
  readonly schema: string;
  /** A fresh, empty effects ledger in a schema of its own (one per test). */
  ledger(): Promise<Ledger>;
  close(): Promise<void>;
}

/** Migrates once into a fresh schema; ledgers and the schema are dropped by `close()`. */
export async function conformanceDb(prefix: string): Promise<ConformanceDb> {
  const pool = createTestPool({ max: 16 });
  const schema = freshSchemaName(prefix);
  const schemas = [schema];
  await migrate(pool, { schema });
  return {
    pool,
    schema,
    async ledger() {
      const s = freshSchemaName(`${prefix}_fx`);
      schemas.push(s);
      return createLedger(pool, s);
    },
    async close() {
      for (const s of schemas) await dropSchema(pool, s);
      await pool.end();
    },
  };
}

export { sleep, waitFor } from '../../support/index.js';

/** Distinct ids with a committed effect in `ledger`. */
export async function distinctEffects(ledger: Ledger): Promise<number> {
  return new Set((await ledger.effects()).map((e) => e.messageId)).size;
}

/** The effect every scenario records: one ledger row in the handler's own transaction. */
export function recordEffect(ledger: Ledger): Handler {
  return async (envelope, { tx, id }) => {
    await ledger.record(tx, { messageId: id, key: envelope.key ?? '', payload: envelope.body.toString() });
  };
}
