import {
  type Message,
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SerializedError } from '@once/core';

/** SQS allows ten message attributes; three are ours, the rest are copied from the original. */
const MAX_ATTRIBUTES = 10;
const ERROR_MAX_CHARS = 2048;

/** Why a message is dead-lettered, as written into the `once-error` attribute (JSON). */
export interface DeadLetterReason {
  /** `failed` or `conflict`. */
  status: string;
  /** The failure reason (`permanent`, `max-attempts`, `invalid-id`, `previously-failed`), or `conflict`. */
  reason: string;
  error: SerializedError;
}

/** The attributes of a dead-lettered copy: `once-error`, `once-source-queue`, `once-receive-count`. */
export const DEAD_LETTER_ATTRIBUTES = Object.freeze({
  error: 'once-error',
  sourceQueue: 'once-source-queue',
  receiveCount: 'once-receive-count',
});

/**
 * Sends a copy of `message` to the dead-letter queue with the error in attributes. Throws when
 * SQS did not take it: the caller must then not delete the original. On a FIFO dead-letter queue
 * the copy keeps the group and is deduplicated by the original's MessageId (a resend within five
 * minutes collapses; dead-lettering is at least once beyond that).
 */
export async function sendToDeadLetter(
  client: SQSClient,
  target: { url: string; fifo: boolean },
  sourceQueueUrl: string,
  message: Message,
  why: DeadLetterReason,
): Promise<void> {
  const error = JSON.stringify({
    status: why.status,
    reason: why.reason,
    name: why.error.name,
    message: why.error.message.slice(0, ERROR_MAX_CHARS),
    ...(why.error.code ? { code: why.error.code } : {}),
  });
  const ours: Record<string, MessageAttributeValue> = {
    [DEAD_LETTER_ATTRIBUTES.error]: { DataType: 'String', StringValue: error },
    [DEAD_LETTER_ATTRIBUTES.sourceQueue]: { DataType: 'String', StringValue: sourceQueueUrl },
    [DEAD_LETTER_ATTRIBUTES.receiveCount]: {
      DataType: 'Number',
      StringValue: message.Attributes?.ApproximateReceiveCount ?? '1',
    },
  };
  const attributes: Record<string, MessageAttributeValue> = {};
  // The id attribute first (it sorts before most names only by luck, so put it there on purpose).
  const original = Object.entries(message.MessageAttributes ?? {}).sort(([a], [b]) =>
    a === 'message-id' ? -1 : b === 'message-id' ? 1 : a < b ? -1 : 1,
  );
  for (const [name, value] of original) {
    if (Object.keys(attributes).length >= MAX_ATTRIBUTES - Object.keys(ours).length) break;
    if (name in ours) continue;
    attributes[name] = value;
  }
  Object.assign(attributes, ours);
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
