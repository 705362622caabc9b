import type { SerializedError } from '../errors.js';
import type { ConflictOutcome, FailedOutcome, FailReason } from '../message/outcome.js';

/**
 * The one name under which every adapter attaches why a message was dead-lettered: a Kafka header,
 * an AMQP header, an SQS message attribute. Its value is {@link DeadLetterRecord} as JSON.
 */
export const DEAD_LETTER_RECORD = 'once-dead-letter';

/** Longest error message kept in a record, in characters; the rest is cut with a marker. */
const ERROR_MESSAGE_MAX_CHARS = 2_000;

/**
 * Why and from where a message was dead-lettered, the same on every broker. A dead-letter copy
 * carries the original body and (where the broker can hold them) the original headers, plus this.
 */
export interface DeadLetterRecord {
  /** `permanent`, `max-attempts`, `invalid-id`, `previously-failed`, or `conflict`. */
  reason: FailReason | 'conflict';
  /** The error that ended the message: name, message (cut to 2,000 characters) and code. */
  error: SerializedError;
  /** The attempt the message ended at (1 for a first delivery). */
  attempts: number;
  /** The consumer that dead-lettered it. */
  consumer: string;
  /** The message id, when it had a usable one. */
  id: string | undefined;
  /** Where it came from: broker, queue or topic, partition, offset, group. */
  origin: {
    /** The broker's name: `kafka`, `sqs`, `rabbitmq` or `nats`. */
    broker: string;
    /** The topic, queue or subject the message was consumed from. */
    queue: string;
    /** The Kafka partition; absent on other brokers. */
    partition?: number;
    /** The Kafka offset, as a decimal string; absent on other brokers. */
    offset?: string;
    /** The Kafka consumer group or the SQS message group; absent elsewhere. */
    group?: string;
  };
  /** ISO 8601 time of dead-lettering. */
  at: string;
  /**
   * Original headers or attributes the broker could not carry on the copy (SQS keeps at most ten
   * message attributes): nothing is dropped, they travel here instead.
   */
  overflow?: Record<string, string>;
}

/** The outcomes that send a message to a dead-letter destination. */
export type DeadLetterOutcome = FailedOutcome | ConflictOutcome;

const CONFLICT_ERROR: SerializedError = {
  name: 'ConflictError',
  message: 'same message id as a processed message, different payload fingerprint',
};

/** The record for a `failed` or `conflict` outcome. */
export function deadLetterRecordOf(outcome: DeadLetterOutcome, consumer: string): DeadLetterRecord {
  const error = outcome.status === 'conflict' ? CONFLICT_ERROR : outcome.error;
  const { broker, queue, partition, offset, group } = outcome.envelope.source;
  return {
    reason: outcome.status === 'conflict' ? 'conflict' : outcome.reason,
    error: {
      name: error.name,
      message:
        error.message.length > ERROR_MESSAGE_MAX_CHARS
          ? `${error.message.slice(0, ERROR_MESSAGE_MAX_CHARS)}… (cut)`
          : error.message,
      ...(error.code === undefined ? {} : { code: error.code }),
    },
    attempts: outcome.attempt ?? outcome.envelope.attempt,
    consumer,
    id: outcome.id,
    origin: {
      broker,
      queue,
      ...(partition === undefined ? {} : { partition }),
      ...(offset === undefined ? {} : { offset }),
      ...(group === undefined ? {} : { group }),
    },
    at: new Date().toISOString(),
  };
}

/** The record as the header or attribute value (JSON; NUL and lone surrogates escaped by JSON). */
export function encodeDeadLetterRecord(record: DeadLetterRecord): string {
  return JSON.stringify(record);
}

/** Reads a record back from a dead-letter copy's header or attribute; undefined if absent or not one. */
export function decodeDeadLetterRecord(value: string | Buffer | undefined): DeadLetterRecord | undefined {
  if (value === undefined) return undefined;
  try {
    const r = JSON.parse(Buffer.isBuffer(value) ? value.toString('utf8') : value) as DeadLetterRecord;
    return typeof r === 'object' && r !== null && typeof r.reason === 'string' ? r : undefined;
  } catch {
    return undefined;
  }
}
