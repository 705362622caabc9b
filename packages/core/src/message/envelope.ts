import { InvalidIdError } from '../errors.js';

/** Where a delivery came from; adapters fill what their broker knows. */
export interface EnvelopeSource {
  /** `kafka`, `sqs`, `rabbitmq`, or another adapter's name. */
  broker: string;
  /** Topic, queue URL or queue name. */
  queue: string;
  /** Kafka partition. */
  partition?: number;
  /** Kafka offset, as a string (kafkajs gives strings). */
  offset?: string;
  /** Kafka consumer group, SQS message group. */
  group?: string;
  /**
   * The broker's own handle on this delivery where queue, partition and offset do not identify it:
   * SQS's `MessageId`, RabbitMQ's delivery tag. For log lines (a message without a usable id has
   * no other name). @default none
   */
  delivery?: string;
  /**
   * Where the adapter took the envelope's `id` from, where its broker offers more than one place
   * (SQS: its `idFrom` option, `header`, `deduplication-id` or `sqs-message-id`). Recorded with a
   * failed message: a republish of it must know whether its consumer reads the broker's own
   * deduplication id. @default not recorded
   */
  idFrom?: string;
}

/** A broker-neutral delivery: what adapters hand to core. */
export interface Envelope {
  /** The message id as delivered (a header, an attribute, AMQP `messageId`), if any. */
  id?: string | undefined;
  /**
   * Set by an adapter that could not read the delivered id faithfully (its bytes are not valid
   * UTF-8, or its client library already replaced them with U+FFFD): two different ids would
   * collapse into one, so the envelope is rejected as an invalid id unless `idOf` supplies one.
   */
  idUnusable?: string | undefined;
  /** The message's bytes, as the broker delivered them. */
  body: Buffer;
  /** The message's headers (attributes, properties), by name. */
  headers: Readonly<Record<string, string | undefined>>;
  /** Kafka key, SQS group id, AMQP routing key. */
  key?: string | undefined;
  /** Where the delivery came from. */
  source: EnvelopeSource;
  /** 1 for a first delivery; the broker's count or our own for later ones. */
  attempt: number;
  /** The broker says this may have been delivered before (or the consumer restarted). */
  redelivered: boolean;
  /**
   * The broker's liveness of this delivery (SQS visibility, Kafka session), for adapters that
   * have one. Lease mode calls it at every lease renewal: see {@link Liveness}. @default none
   */
  liveness?: Liveness | undefined;
}

/**
 * Longest accepted message id, in characters (Unicode code points): 512 four-byte characters
 * are 2,048 bytes of UTF-8, which with a consumer name of at most 200 bytes keeps the inbox
 * primary key inside PostgreSQL's btree entry limit (2,704 bytes).
 */
export const MAX_ID_LENGTH = 512;
/** The same limit in UTF-8 bytes (only ids of more than 682 UTF-16 units can reach it). */
export const MAX_ID_BYTES = 2048;

/** Derives the id from an envelope, e.g. a business key taken from the body. */
export type IdOf = (envelope: Envelope) => string | undefined;

/** Returns the envelope's id, or throws an `InvalidIdError` (from `@once/core`) that says what is wrong. */
export function resolveId(envelope: Envelope, idOf?: IdOf): string {
  let raw: unknown;
  try {
    raw = idOf ? idOf(envelope) : envelope.id;
  } catch (err) {
    throw Object.assign(
      new InvalidIdError(`idOf threw: ${(err as Error)?.message ?? String(err)}`, undefined),
      {
        cause: err,
      },
    );
  }
  const from = idOf ? 'idOf(envelope)' : 'the message id';
  if (!idOf && envelope.idUnusable !== undefined) {
    throw new InvalidIdError(`the message id is unusable: ${envelope.idUnusable}`, envelope.id?.slice(0, 64));
  }
  if (raw === undefined || raw === null) {
    throw new InvalidIdError(
      `${from} is missing: publish with a message id (once's publishers set one) or pass idOf`,
      raw,
    );
  }
  if (typeof raw !== 'string') {
    throw new InvalidIdError(`${from} must be a string, got ${typeof raw}`, raw);
  }
  if (raw.length === 0) throw new InvalidIdError(`${from} is empty`, raw);
  // PostgreSQL text cannot hold NUL, so such an id could never be recorded.
  if (raw.includes('\0')) throw new InvalidIdError(`${from} contains a NUL character`, raw.slice(0, 64));
  // A lone surrogate has no UTF-8 form: PostgreSQL would store U+FFFD, and 'a\ud800' and
  // 'a\udbff' would become one id.
  if (!isWellFormed(raw)) {
    throw new InvalidIdError(
      `${from} is not well-formed Unicode (it holds a lone surrogate)`,
      raw.slice(0, 64),
    );
  }
  // Characters are code points: a four-byte character is two UTF-16 units but one character.
  // Only a string of more than 512 units can be too long, so the hot path counts nothing.
  if (raw.length > MAX_ID_LENGTH) {
    const chars = codePoints(raw);
    if (chars > MAX_ID_LENGTH) {
      throw new InvalidIdError(
        `${from} is ${chars} characters; the maximum is ${MAX_ID_LENGTH}`,
        raw.slice(0, 64),
      );
    }
    if (raw.length > MAX_ID_BYTES / 3 && Buffer.byteLength(raw) > MAX_ID_BYTES) {
      throw new InvalidIdError(
        `${from} is ${Buffer.byteLength(raw)} bytes in UTF-8; the maximum is ${MAX_ID_BYTES}`,
        raw.slice(0, 64),
      );
    }
  }
  return raw;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** False for a string holding a lone surrogate, which has no UTF-8 form (PostgreSQL stores U+FFFD). */
export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/**
 * Where a delivery came from, as stored with a failed message (the inbox's `origin` column) so an
 * operator can send its body back there: the source, the key and the headers that were set.
 */
export interface Origin {
  broker: string;
  queue: string;
  /** Kafka partition. */
  partition?: number;
  group?: string;
  key?: string;
  headers: Record<string, string>;
  /** {@link EnvelopeSource.idFrom}; absent on rows recorded before it was (schema version 10). */
  idFrom?: string;
}

/** The {@link Origin} of an envelope, as JSON for the inbox. */
export function originOf(envelope: Envelope): string {
  const { broker, queue, partition, group, idFrom } = envelope.source;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(envelope.headers))
    if (value !== undefined) headers[name] = value;
  const origin: Origin = {
    broker,
    queue,
    ...(partition === undefined ? {} : { partition }),
    ...(group === undefined ? {} : { group }),
    ...(envelope.key === undefined ? {} : { key: envelope.key }),
    headers,
    ...(idFrom === undefined ? {} : { idFrom }),
  };
  return JSON.stringify(origin);
}

/**
 * The broker's own liveness for one delivery, exposed by an adapter so that lease mode runs on
 * one clock: each time core renews a message's lease (when it claims the message, at each
 * heartbeat, at each step), it calls {@link Liveness.extend} with the lease length, and the
 * adapter keeps the delivery alive at the broker for that long from now.
 *
 * - SQS: `ChangeMessageVisibility` of the receipt handle to `ceil(ms / 1000)` seconds (at most
 *   43200), and no visibility timer of the adapter's own for that message.
 * - Kafka: the consumer group session (`heartbeat()` of eachBatch); kafkajs throttles it.
 * - RabbitMQ: nothing can be extended (consumer_timeout is per delivery, set on the broker or
 *   the queue); `extend` may be a no-op, and `leaseMs` plus the handler's deadline must stay
 *   below the consumer timeout.
 *
 * Core awaits nothing from it while a handler runs: a rejection is logged and ignored (the lease,
 * not the broker, decides who may write).
 */
export interface Liveness {
  /** Keep this delivery alive at the broker for at least `ms` more milliseconds. */
  extend(ms: number): Promise<void> | void;
}
