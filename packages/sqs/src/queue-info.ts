import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { OnceError } from '@once/core';
import { SqsErrorCode } from './errors.js';

/** What start() learns about a queue. */
export interface QueueInfo {
  /** The queue's URL. */
  url: string;
  /** True for a FIFO queue (SQS says FifoQueue, or the URL ends in `.fifo`). */
  fifo: boolean;
  /** True when the FIFO queue deduplicates on a hash of the body; false on standard queues. */
  contentBasedDeduplication: boolean;
  /** The queue's RedrivePolicy, parsed, when it has one. */
  redrive:
    | {
        /** The ARN of the queue SQS moves a message to after `maxReceiveCount` receives. */
        deadLetterTargetArn?: string;
        /** How many receives SQS allows before it moves a message to the dead-letter target. */
        maxReceiveCount?: number;
      }
    | undefined;
  /** The queue's default visibility timeout, in seconds. */
  visibilityTimeoutS: number;
  /** How long the queue keeps a message (MessageRetentionPeriod), in seconds, when it says. */
  retentionS: number | undefined;
}

function isQueueMissing(err: unknown): boolean {
  const e = err as { name?: string; Code?: string; message?: string };
  return (
    e?.name === 'QueueDoesNotExist' ||
    e?.name === 'AWS.SimpleQueueService.NonExistentQueue' ||
    e?.Code === 'AWS.SimpleQueueService.NonExistentQueue' ||
    /does not exist/i.test(e?.message ?? '')
  );
}

/** Reads a queue's attributes; a missing queue or an unreachable endpoint becomes a named OnceError. */
export async function queueInfo(client: SQSClient, url: string, what = 'queueUrl'): Promise<QueueInfo> {
  let attrs: Record<string, string>;
  try {
    const res = await client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
    attrs = res.Attributes ?? {};
  } catch (err) {
    if (isQueueMissing(err)) {
      throw new OnceError(
        SqsErrorCode.QueueNotFound,
        `${what} ${url}: the queue does not exist; create it, or check the URL and the client's region and endpoint`,
        { cause: err },
      );
    }
    throw new OnceError(
      SqsErrorCode.Unreachable,
      `${what} ${url}: GetQueueAttributes failed (${(err as Error)?.message ?? String(err)}); check the endpoint and credentials`,
      { retryable: true, cause: err },
    );
  }
  let redrive: QueueInfo['redrive'];
  if (attrs.RedrivePolicy) {
    try {
      const parsed = JSON.parse(attrs.RedrivePolicy) as {
        deadLetterTargetArn?: string;
        maxReceiveCount?: unknown;
      };
      redrive = {
        ...(parsed.deadLetterTargetArn ? { deadLetterTargetArn: parsed.deadLetterTargetArn } : {}),
        ...(parsed.maxReceiveCount !== undefined ? { maxReceiveCount: Number(parsed.maxReceiveCount) } : {}),
      };
    } catch {
      redrive = {};
    }
  }
  return {
    url,
    fifo: attrs.FifoQueue === 'true' || url.endsWith('.fifo'),
    contentBasedDeduplication: attrs.ContentBasedDeduplication === 'true',
    redrive,
    visibilityTimeoutS: Number(attrs.VisibilityTimeout ?? 30),
    retentionS: attrs.MessageRetentionPeriod === undefined ? undefined : Number(attrs.MessageRetentionPeriod),
  };
}
