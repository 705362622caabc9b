import { createHash } from 'node:crypto';
import type { IdempotentRequest } from './types.js';

const JSON_TYPE = /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i;
// JSON.parse reads numbers as doubles: two bodies that differ in a 16th digit, or in a huge
// exponent, would parse alike. Such bodies are compared byte for byte instead.
const LOSSY_NUMBER = /\d{16,}|[eE][+-]?\d{3,}/;

/**
 * The bytes whose SHA-256 is the request's fingerprint (stored in the inbox's `fingerprint`
 * column): the method, the route, the chosen headers (absent ones as null) and the SHA-256 of the
 * canonical body. A JSON body (`application/json`, `application/*+json`) is canonical once parsed
 * and written again with its object keys sorted, so whitespace and key order do not matter; any
 * other body, a JSON body that does not parse, or one whose numbers a double cannot hold exactly,
 * is taken byte for byte.
 */
export function fingerprintInput(request: IdempotentRequest, headers: readonly string[]): Buffer {
  const chosen = [...headers].sort().map((h) => [h, request.headers[h] ?? null]);
  const body = createHash('sha256').update(canonicalBody(request)).digest('hex');
  return Buffer.from(
    JSON.stringify(['once-http/1', request.method.toUpperCase(), request.route, chosen, body]),
  );
}

/** The body as it is fingerprinted (see {@link fingerprintInput}). */
export function canonicalBody(request: IdempotentRequest): Uint8Array {
  const type = request.headers['content-type'];
  if (!type || !JSON_TYPE.test(type) || request.body.length === 0) return request.body;
  const text = Buffer.from(request.body).toString('utf8');
  if (LOSSY_NUMBER.test(text)) return request.body;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return request.body;
  }
  return Buffer.from(JSON.stringify(sortKeys(value)));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = Object.create(null); // so a "__proto__" key stays a key
  for (const k of Object.keys(value).sort()) out[k] = sortKeys((value as Record<string, unknown>)[k]);
  return out;
}
