import { createHash } from 'node:crypto';
import { canonicalJson } from './json-canonical.js';
import { canonicalTarget } from './target.js';
import type { IdempotentRequest } from './types.js';

/**
 * The version tag at the head of every fingerprint input: a change to what identifies a request
 * gets a new tag, so fingerprints of two versions never meet by accident, and a key stored under
 * an older one is recognised by recomputing that version (fingerprint-v1.ts).
 */
export const FINGERPRINT_VERSION = 'once-http/2';

/**
 * The bytes whose SHA-256 is the request's fingerprint (stored in the inbox's `fingerprint`
 * column). Two requests with one key have the same fingerprint exactly when they are the same
 * request (docs/http.md, "Request identity"): the same method (case-sensitive), the same target
 * ({@link canonicalTarget}: path and query, the query in its order), the same route name when one
 * is given, the same values of the `headers` chosen (an absent header is not an empty one), and
 * the same body ({@link canonicalBody}).
 */
export function fingerprintInput(request: IdempotentRequest, headers: readonly string[]): Buffer {
  if (typeof request.target !== 'string') {
    throw new TypeError('IdempotentRequest.target must be the request target (path and query) as sent');
  }
  const chosen = [...headers].sort().map((h) => [h, request.headers[h] ?? null]);
  const json = canonicalJson(request.body);
  const hash = createHash('sha256');
  if (json !== undefined) hash.update('J').update(json, 'utf8');
  else hash.update('B').update(request.body);
  const body = hash.digest('hex');
  return Buffer.from(
    JSON.stringify([
      FINGERPRINT_VERSION,
      request.method,
      canonicalTarget(request.target),
      request.route ?? null,
      chosen,
      body,
    ]),
  );
}

/**
 * The body as the fingerprint hashes it: a body that is one JSON value in valid UTF-8 with no
 * repeated keys, whatever its Content-Type, as `J` and its canonical
 * text, so whitespace, key order, string escapes and the spelling of numbers (`1`, `1.0`, `1e0`)
 * do not matter; any other body as `B` and its bytes. The tag keeps a canonical text from ever
 * equalling some other body's bytes.
 */
export function canonicalBody(request: Pick<IdempotentRequest, 'body'>): Buffer {
  const json = canonicalJson(request.body);
  if (json !== undefined) return Buffer.from(`J${json}`, 'utf8');
  return Buffer.concat([Buffer.from('B'), request.body]);
}
