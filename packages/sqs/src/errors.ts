/**
 * Error codes raised by @once/sqs, beside core's (`INVALID_OPTION`, `CLOSED` for a consumer that
 * is not running, `ATTEMPTS_EXHAUSTED` for a message that keeps killing the process).
 */
export const SqsErrorCode = {
  /** A queue URL (`queueUrl`, `deadLetterQueueUrl`) names no queue: GetQueueAttributes said so. */
  QueueNotFound: 'SQS_QUEUE_NOT_FOUND',
  /** SQS could not be reached or refused the call for another reason. Retryable. */
  Unreachable: 'SQS_UNREACHABLE',
  /** The queue's configuration contradicts the options (content-based dedup with `idFrom: 'deduplication-id'`). */
  QueueMismatch: 'SQS_QUEUE_MISMATCH',
  /** A FIFO publish without a group id (the outbox message has no key). */
  MissingGroupId: 'SQS_MISSING_GROUP_ID',
  /** A publish would carry more message attributes than SQS's ten. */
  TooManyAttributes: 'SQS_TOO_MANY_ATTRIBUTES',
  /** SendMessageBatch failed an entry without saying why. */
  SendFailed: 'SQS_SEND_FAILED',
} as const;
/** One of {@link SqsErrorCode}'s values: the `code` of the errors this package throws. */
export type SqsErrorCode = (typeof SqsErrorCode)[keyof typeof SqsErrorCode];
