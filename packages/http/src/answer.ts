import type { Outcome, SerializedError } from '@once/core';
import type { StoredHttpResponse } from '@once/core/adapter';

/**
 * What a keyed request is answered, as core decided it: `@once/http`'s counterpart of a broker
 * adapter's settle plan. A request has no broker to settle; it has an HTTP answer, and a duplicate
 * needs the stored response, which a settle plan does not carry. {@link answerOf} is the one
 * place that reads an outcome; the engine acts on the answer.
 */
export type KeyAnswer =
  /** The handler ran and its answer is stored with the key: send what it answered. */
  | { kind: 'processed' }
  /** The key was answered before: replay `stored`, or read it (lease mode's duplicates come without it). */
  | { kind: 'replay'; id: string; stored: StoredHttpResponse | undefined }
  /** The key was used with another request: 422 (or a fingerprint of an older build to try). */
  | { kind: 'mismatch' }
  /** Another request holds the key: 409 with `Retry-After`. */
  | { kind: 'in-flight'; retryAfterS: number }
  /** The handler failed and nothing was kept: a retry with the same key runs it again. */
  | { kind: 'failed'; error: SerializedError }
  /**
   * Over several databases: the key was routed to a second database (core's check), so it was not
   * run, and nothing was recorded: 500 `unroutable`.
   */
  | { kind: 'unroutable'; error: SerializedError }
  /** The database or once's schema cannot be used: 503 with `Retry-After`. */
  | { kind: 'unavailable'; error: SerializedError; retryAfterS: number };

/** Whole seconds of a `Retry-After`, at least 1. */
const seconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000));

/** The one mapping from a key's outcome to its HTTP answer. */
export function answerOf(outcome: Outcome<StoredHttpResponse>): KeyAnswer {
  switch (outcome.status) {
    case 'processed':
      return { kind: 'processed' };
    case 'duplicate':
      return { kind: 'replay', id: outcome.id, stored: outcome.result };
    case 'conflict':
      return { kind: 'mismatch' };
    case 'busy':
      return { kind: 'in-flight', retryAfterS: seconds(outcome.delayMs) };
    case 'failed':
      if (outcome.reason === 'unroutable') return { kind: 'unroutable', error: outcome.error };
      // 'failed' is recorded nowhere (the engine's inbox has recordFailed off): the retry runs again.
      return { kind: 'failed', error: outcome.error };
    case 'retry':
      // 'failed' is recorded nowhere (the engine's inbox has recordFailed off): the retry runs again.
      return { kind: 'failed', error: outcome.error };
    case 'not-run':
      return { kind: 'unavailable', error: outcome.error, retryAfterS: seconds(outcome.delayMs) };
  }
}
