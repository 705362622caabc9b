import { ErrorCode, OnceError, serializeError } from '../errors.js';
import type { OutboxPublishResult } from '../outbox/outbox-publisher.js';

/**
 * What a publisher that sends its messages one by one reports to the relay: the id check before
 * a send, and one result per message from the settled sends.
 */

/** Throws `INVALID_ID` for a message whose id is not a non-empty string: nothing can carry it. */
export function checkMessageId(
  message:
    | {
        /** The outbox message's id; anything but a non-empty string is refused. */
        readonly id: string;
      }
    | undefined,
): void {
  if (typeof message?.id !== 'string' || message.id.length === 0) {
    throw new OnceError(ErrorCode.InvalidId, 'an outbox message needs a non-empty string id');
  }
}

/**
 * One result per message, in order, from `Promise.allSettled` over their sends. A send that threw
 * an error whose code is in `permanent` is not retryable (the relay parks the row at once); any
 * other failure is, under the same id. `sent` sees each fulfilled send's value.
 */
export function settledResults<T>(
  messages: readonly {
    /** The message id each result is reported under, in the order of `settled`. */
    readonly id: string;
  }[],
  settled: readonly PromiseSettledResult<T>[],
  permanent: ReadonlySet<string>,
  sent?: (value: T, id: string) => void,
): OutboxPublishResult[] {
  return settled.map((r, i) => {
    const id = messages[i]!.id;
    if (r.status === 'fulfilled') {
      sent?.(r.value, id);
      return { id, ok: true as const };
    }
    const retryable = !(OnceError.is(r.reason) && permanent.has(r.reason.code));
    return { id, ok: false as const, error: serializeError(r.reason), retryable };
  });
}
