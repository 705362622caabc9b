import type { StoredHttpResponse } from '../engine/http-response-store.js';
import { callerTransactionsOf, type InboxOptions, resolveInboxOptions } from '../engine/options.js';
import { ErrorCode, OnceError } from '../errors.js';
import { Inbox } from '../inbox.js';
import { namingFactory } from '../option-check.js';

/**
 * An inbox for `@once/http`'s keys: each id keeps an HTTP response, written by the inbox with the
 * key's COMMIT. The handler resolves with an `HttpResponseToStore` (the response, and whether a
 * rollback to the savepoint taken with the claim undoes the handler's writes first); a duplicate's
 * `result` is the stored response (`StoredHttpResponse`; in lease mode, read it with
 * `HttpResponseStore` when it is undefined). In transaction mode a new key costs two round trips
 * besides the handler's own statements, as a plain route's BEGIN and COMMIT do (BEGIN, claim and
 * savepoint in one; store and COMMIT in one), and a replay one (its ROLLBACK is not waited for).
 * Each message runs in its own transaction. Cannot be combined with `storeResult` or
 * `mode: { transactions }`.
 */
export function createHttpInbox(options: InboxOptions<StoredHttpResponse>): Inbox<StoredHttpResponse> {
  const o = namingFactory('createHttpInbox', () => resolveInboxOptions(options));
  for (const [field, set] of [
    ['storeResult', o.storeResult],
    ['mode', callerTransactionsOf(o) !== undefined],
  ] as const) {
    if (set) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        `createHttpInbox: option '${field}' cannot be ${field === 'mode' ? '{ transactions }' : 'set'} here: the key's row keeps the response`,
      );
    }
  }
  return new Inbox(Object.freeze({ ...o, httpResponses: true }));
}
