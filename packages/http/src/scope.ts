import { createHash } from 'node:crypto';
import { MAX_ID_LENGTH } from '@once/core/admin';
import { MAX_KEY_LENGTH } from './options.js';

/** Longest scope kept readable in the id; a longer one is replaced by its hash. */
export const MAX_ENCODED_SCOPE_LENGTH = MAX_ID_LENGTH - MAX_KEY_LENGTH - 1 - 16;

/**
 * The inbox message id of `key` in `scope`: `<scope, percent-encoded>/<key>`. The encoded scope
 * holds no `/`, so the first `/` splits the two and no pair of scope and key imitates another. A
 * scope whose encoding is longer than {@link MAX_ENCODED_SCOPE_LENGTH} becomes `#` and the
 * base64url SHA-256 of its UTF-8 (the encoding never starts with `#`). Keys are printable ASCII of
 * at most 255 characters, so the id stays within core's 512 characters (and 2,048 bytes).
 */
export function messageIdOf(scope: string, key: string): string {
  const encoded = encodeURIComponent(scope);
  const part =
    encoded.length <= MAX_ENCODED_SCOPE_LENGTH
      ? encoded
      : `#${createHash('sha256').update(scope, 'utf8').digest('base64url')}`;
  return `${part}/${key}`;
}

const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** Why `scope` cannot be used, or undefined when it can: a non-empty, well-formed string. */
export function scopeProblem(scope: unknown): string | undefined {
  if (typeof scope !== 'string') return `the scope function returned ${typeof scope}, not a string`;
  if (scope.length === 0) return 'the scope function returned an empty string: include the principal';
  // A lone surrogate has no UTF-8; encodeURIComponent would throw, and replacing it would let two scopes meet.
  if (LONE_SURROGATE.test(scope)) return 'the scope function returned a string with a lone surrogate';
  return undefined;
}
