import {
  type Message,
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import {
  DEAD_LETTER_RECORD,
  type DeadLetterRecord,
  decodeDeadLetterRecord,
  encodeDeadLetterRecord,
} from '@once/core/adapter';

/** SQS carries at most ten message attributes; one is the record, nine are left for the original's. */
const MAX_ATTRIBUTES = 10;

/**
 * Sends a copy of `message` to the dead-letter queue: the original body, the record (why, from
 * where, after how many receives) in the one attribute `once-dead-letter`, and the original
 * attributes: the id attribute first, then by name, as many as fit in the nine slots left; the
 * rest travel in the record's `overflow` (see {@link encodeOverflowValue}), so none is dropped.
 * Throws when SQS did not take it: the caller must then not delete the original. On a FIFO
 * dead-letter queue the copy keeps the group and is deduplicated by the original's MessageId (a
 * resend within five minutes collapses; dead-lettering is at least once beyond that).
 */
export async function sendToDeadLetter(
  client: SQSClient,
  target: { url: string; fifo: boolean },
  message: Message,
  record: DeadLetterRecord,
  idHeader: string,
): Promise<void> {
  const original = Object.entries(message.MessageAttributes ?? {}).sort(([a], [b]) =>
    a === idHeader ? -1 : b === idHeader ? 1 : a < b ? -1 : a > b ? 1 : 0,
  );
  const attributes: Record<string, MessageAttributeValue> = {};
  const overflow: Record<string, string> = {};
  for (const [name, value] of original) {
    // An original named like the record (a replayed dead letter) keeps its value in the overflow.
    if (name !== DEAD_LETTER_RECORD && Object.keys(attributes).length < MAX_ATTRIBUTES - 1) {
      attributes[name] = value;
    } else {
      overflow[name] = encodeOverflowValue(value);
    }
  }
  const full: DeadLetterRecord = Object.keys(overflow).length > 0 ? { ...record, overflow } : record;
  attributes[DEAD_LETTER_RECORD] = { DataType: 'String', StringValue: sqsSafe(encodeDeadLetterRecord(full)) };
  await client.send(
    new SendMessageCommand({
      QueueUrl: target.url,
      MessageBody: message.Body ?? '',
      MessageAttributes: attributes,
      ...(target.fifo
        ? {
            MessageGroupId: message.Attributes?.MessageGroupId ?? 'once-dead-letter',
            MessageDeduplicationId: message.MessageId ?? `${Date.now()}`,
          }
        : {}),
    }),
  );
}

/**
 * An original attribute as a string of the record's `overflow`: its DataType, a colon, then the
 * value: as sent for String and Number types (custom labels included, e.g. `Number.int:42`),
 * base64 of the bytes for Binary types (`Binary:AAEC`). A DataType never holds a colon, so the
 * first colon always ends it. {@link decodeOverflowValue} gives the attribute back.
 */
export function encodeOverflowValue(value: MessageAttributeValue): string {
  const type = value.DataType ?? 'String';
  if (type.startsWith('Binary')) return `${type}:${Buffer.from(value.BinaryValue ?? []).toString('base64')}`;
  return `${type}:${value.StringValue ?? ''}`;
}

/** The attribute an overflow string stands for (see {@link encodeOverflowValue}). */
export function decodeOverflowValue(encoded: string): MessageAttributeValue {
  const colon = encoded.indexOf(':');
  const type = colon < 0 ? 'String' : encoded.slice(0, colon);
  const value = colon < 0 ? encoded : encoded.slice(colon + 1);
  if (type.startsWith('Binary')) return { DataType: type, BinaryValue: Buffer.from(value, 'base64') };
  return { DataType: type, StringValue: value };
}

/**
 * Reads a dead-letter copy (received with `MessageAttributeNames: ['All']`): its record, and every
 * attribute of the original message, whether it travelled as an attribute or in the overflow.
 */
export function readDeadLetter(copy: Message):
  | {
      /** The dead-letter record: reason, error, attempts, consumer, id and origin. */
      record: DeadLetterRecord;
      /** Every message attribute of the original, by name, those that travelled in the overflow included. */
      attributes: Record<string, MessageAttributeValue>;
    }
  | undefined {
  const carried = copy.MessageAttributes ?? {};
  const record = decodeDeadLetterRecord(carried[DEAD_LETTER_RECORD]?.StringValue);
  if (!record) return undefined;
  const attributes: Record<string, MessageAttributeValue> = {};
  for (const [name, value] of Object.entries(carried))
    if (name !== DEAD_LETTER_RECORD) attributes[name] = value;
  for (const [name, encoded] of Object.entries(record.overflow ?? {}))
    attributes[name] = decodeOverflowValue(encoded);
  return { record, attributes };
}

/**
 * SQS refuses U+FFFE and U+FFFF in attribute values, and JSON.stringify leaves them as they are
 * (an error message can quote them): write them as JSON escapes, which decode to the same text.
 */
function sqsSafe(json: string): string {
  return json.replace(/[\ufffe\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}
