import { DEAD_LETTER_RECORD, type DeadLetterRecord, encodeDeadLetterRecord } from '@once/core/adapter';
import type { ClientHeaders, ClientMessage, OutgoingMessage } from './client/types.js';

/**
 * Builds the dead-letter copy of a message: the original key, value and headers, byte for byte,
 * plus one header, `once-dead-letter` ({@link DEAD_LETTER_RECORD}), holding core's
 * `DeadLetterRecord` as JSON (the record of core's settle plan): reason, error, attempts,
 * consumer, id, origin (topic, partition, offset, group) and time, the same record every broker
 * adapter writes. Read it back with `decodeDeadLetterRecord` from `@once/core/adapter`.
 */
export function deadLetterMessage(original: ClientMessage, record: DeadLetterRecord): OutgoingMessage {
  const headers: ClientHeaders = { ...(original.headers ?? {}) };
  headers[DEAD_LETTER_RECORD] = encodeDeadLetterRecord(record);
  return { key: original.key ?? null, value: original.value, headers };
}
