import { InvalidIdError } from './errors.js';
import type { Liveness } from './lease/liveness.js';

/** Where a delivery came from; adapters fill what their broker knows. */
export interface EnvelopeSource {
  /** `kafka`, `sqs`, `rabbitmq`, or another adapter's name. */
  broker: string;
  /** Topic, queue URL or queue name. */
  queue: string;
  partition?: number;
  /** Kafka offset, as a string (kafkajs gives strings). */
  offset?: string;
  /** Kafka consumer group, SQS message group. */
  group?: string;
}

/** A broker-neutral delivery: what adapters hand to core. */
export interface Envelope {
  /** The message id as delivered (a header, an attribute, AMQP `messageId`), if any. */
  id?: string | undefined;
  body: Buffer;
  headers: Readonly<Record<string, string | undefined>>;
  /** Kafka key, SQS group id, AMQP routing key. */
  key?: string | undefined;
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
 * Longest accepted message id, in characters. It keeps the inbox primary key well inside
 * PostgreSQL's btree entry limit (2704 bytes) even with four-byte characters.
 */
export const MAX_ID_LENGTH = 512;

/** Derives the id from an envelope, e.g. a business key taken from the body. */
export type IdOf = (envelope: Envelope) => string | undefined;

/** Returns the envelope's id, or throws an {@link InvalidIdError} that says what is wrong. */
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
  if (raw.length > MAX_ID_LENGTH) {
    throw new InvalidIdError(
      `${from} is ${raw.length} characters; the maximum is ${MAX_ID_LENGTH}`,
      raw.slice(0, 64),
    );
  }
  return raw;
}

/**
 * Where a delivery came from, as stored with a failed message (the inbox's `origin` column) so an
 * operator can send its body back there: the source, the key and the headers that were set.
 */
export interface Origin {
  broker: string;
  queue: string;
  partition?: number;
  group?: string;
  key?: string;
  headers: Record<string, string>;
}

/** The {@link Origin} of an envelope, as JSON for the inbox. */
export function originOf(envelope: Envelope): string {
  const { broker, queue, partition, group } = envelope.source;
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
  };
  return JSON.stringify(origin);
}
