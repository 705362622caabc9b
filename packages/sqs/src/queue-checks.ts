import { OnceError } from '@once/core';
import { SqsErrorCode } from './errors.js';
import { queueNameOf, type ResolvedSqsConsumerOptions } from './options.js';
import { type QueueInfo, queueInfo } from './queue-info.js';
import type { DeadLetterTarget } from './settler.js';

// What start() checks of the queue besides its existence, and where its failed messages go.

/**
 * An id taken from the deduplication id needs a FIFO queue without content-based deduplication;
 * `idOf`, when given, decides the id and lifts the check.
 */
export function checkIdSource(
  options: ResolvedSqsConsumerOptions,
  inbox: { idOf?: unknown },
  queue: QueueInfo,
): void {
  if (options.idFrom !== 'deduplication-id' || inbox.idOf) return;
  if (!queue.fifo) {
    throw new OnceError(
      SqsErrorCode.QueueMismatch,
      `idFrom 'deduplication-id' needs a FIFO queue; ${queue.url} is standard`,
    );
  }
  if (queue.contentBasedDeduplication) {
    throw new OnceError(
      SqsErrorCode.QueueMismatch,
      `idFrom 'deduplication-id' refused: ${queue.url} uses content-based deduplication, so the id is a hash of the ` +
        'body and two separate messages with the same body would collapse into one. Publish a message-id attribute ' +
        "(idFrom 'header') or pass idOf",
    );
  }
}

/**
 * Where failed messages go: `deadLetterQueueUrl` (it must exist), or `false` (deleted and
 * logged), or by default the queue's redrive policy, else `<name>-dead` beside it (it must exist:
 * creating queues needs a permission consumers rarely have).
 */
export async function resolveDeadLetter(
  options: ResolvedSqsConsumerOptions,
  queue: QueueInfo,
): Promise<DeadLetterTarget> {
  const option = options.deadLetterQueueUrl;
  if (option === false) return 'discard';
  if (option === undefined && queue.redrive)
    return { redrive: queue.redrive.deadLetterTargetArn ?? 'redrive' };
  const url = option ?? defaultDeadLetterUrl(queue);
  try {
    const target = await queueInfo(options.client, url, 'deadLetterQueueUrl');
    return { url: target.url, fifo: target.fifo };
  } catch (err) {
    if (option !== undefined || !OnceError.is(err) || err.code !== SqsErrorCode.QueueNotFound) throw err;
    throw new OnceError(
      SqsErrorCode.QueueNotFound,
      `the default dead-letter queue ${url} does not exist and ${queue.url} has no redrive policy: create it, ` +
        'pass deadLetterQueueUrl, or pass deadLetterQueueUrl: false to delete failed messages (their inbox rows keep them)',
      { cause: err },
    );
  }
}

/** The default dead-letter queue: `<name>-dead` beside the queue (`<name>-dead.fifo` for FIFO). */
function defaultDeadLetterUrl(queue: QueueInfo): string {
  const name = queueNameOf(queue.url);
  const base = name.endsWith('.fifo') ? name.slice(0, -'.fifo'.length) : name;
  const url = new URL(queue.url);
  url.pathname = url.pathname.replace(/[^/]+\/?$/, `${base}-dead${queue.fifo ? '.fifo' : ''}`);
  return url.toString();
}
