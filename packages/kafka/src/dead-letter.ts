import { DEAD_LETTER_RECORD, type DeadLetterRecord, encodeDeadLetterRecord } from '@once/core/adapter';
import type { IHeaders, KafkaMessage, Message } from 'kafkajs';

/**
 * Builds the dead-letter copy of a message: the original key, value and headers, byte for byte,
 * plus one header, `once-dead-letter` ({@link DEAD_LETTER_RECORD}), holding core's
 * `DeadLetterRecord` as JSON (the record of core's settle plan): reason, error, attempts,
 * consumer, id, origin (topic, partition, offset, group) and time, the same record every broker
 * adapter writes. Read it back with `decodeDeadLetterRecord` from `@once/core/adapter`.
 */
export function deadLetterMessage(original: KafkaMessage, record: DeadLetterRecord): Message {
  const headers: IHeaders = { ...(original.headers ?? {}) };
  headers[DEAD_LETTER_RECORD] = encodeDeadLetterRecord(record);
  return { key: original.key ?? null, value: original.value, headers };
}
