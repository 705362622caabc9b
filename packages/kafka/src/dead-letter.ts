import type { ConflictOutcome, FailedOutcome } from '@once/core';
import type { IHeaders, KafkaMessage, Message } from 'kafkajs';

/** Headers once adds to a dead-lettered message, beside the original ones. */
export const DeadLetterHeader = {
  Reason: 'once-dlq-reason',
  ErrorName: 'once-error-name',
  ErrorMessage: 'once-error-message',
  ErrorCode: 'once-error-code',
  Attempts: 'once-attempts',
  SourceTopic: 'once-source-topic',
  SourcePartition: 'once-source-partition',
  SourceOffset: 'once-source-offset',
  Consumer: 'once-consumer',
  DeadLetteredAt: 'once-dead-lettered-at',
} as const;

const MAX_ERROR_MESSAGE = 2_000;

/** The outcomes that send a message to the dead-letter topic. */
export type DeadLetterOutcome = FailedOutcome | ConflictOutcome;

/**
 * Builds the dead-letter copy of a message: the original key, value and headers (raw bytes kept),
 * plus why it failed and where it came from.
 */
export function deadLetterMessage(
  original: KafkaMessage,
  source: { topic: string; partition: number },
  outcome: DeadLetterOutcome,
  consumer: string,
): Message {
  const headers: IHeaders = { ...(original.headers ?? {}) };
  const reason = outcome.status === 'conflict' ? 'conflict' : outcome.reason;
  const error =
    outcome.status === 'conflict'
      ? {
          name: 'ConflictError',
          message: 'same message id as a processed message, different payload fingerprint',
        }
      : outcome.error;
  headers[DeadLetterHeader.Reason] = reason;
  headers[DeadLetterHeader.ErrorName] = error.name;
  headers[DeadLetterHeader.ErrorMessage] = error.message.slice(0, MAX_ERROR_MESSAGE);
  if ('code' in error && typeof error.code === 'string') headers[DeadLetterHeader.ErrorCode] = error.code;
  else delete headers[DeadLetterHeader.ErrorCode];
  headers[DeadLetterHeader.Attempts] = String(outcome.envelope.attempt);
  headers[DeadLetterHeader.SourceTopic] = source.topic;
  headers[DeadLetterHeader.SourcePartition] = String(source.partition);
  headers[DeadLetterHeader.SourceOffset] = original.offset;
  headers[DeadLetterHeader.Consumer] = consumer;
  headers[DeadLetterHeader.DeadLetteredAt] = new Date().toISOString();
  return { key: original.key ?? null, value: original.value, headers };
}
