import { createHash } from 'node:crypto';
import type { IdempotentRequest } from './types.js';

// The first fingerprint (`once-http/1`), kept byte for byte as the builds before version 2 computed
// it, for one purpose only: to recognise a key such a build stored while it is still retained
// (docs/http.md, "Upgrades"). Never used to decide a new key.

const JSON_TYPE = /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i;
const LOSSY_NUMBER = /\d{16,}|[eE][+-]?\d{3,}/;

/**
 * The bytes whose SHA-256 a build with fingerprint version 1 stored for `request`: the method
 * upper-cased, the route (the pattern, the Fetch binding's `route` option, or else the path
 * without the query), the chosen headers and the SHA-256 of the body, a JSON body re-serialised
 * with sorted keys unless it held a number a double cannot hold.
 */
export function fingerprintInputV1(request: IdempotentRequest, headers: readonly string[]): Buffer {
  const chosen = [...headers].sort().map((h) => [h, request.headers[h] ?? null]);
  const body = createHash('sha256').update(canonicalBodyV1(request)).digest('hex');
  const route = request.route ?? pathOf(request.target);
  return Buffer.from(JSON.stringify(['once-http/1', request.method.toUpperCase(), route, chosen, body]));
}

function pathOf(target: string): string {
  const q = target.indexOf('?');
  return q < 0 ? target : target.slice(0, q);
}

function canonicalBodyV1(request: IdempotentRequest): Uint8Array {
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
  const out: Record<string, unknown> = Object.create(null);
  for (const k of Object.keys(value).sort()) out[k] = sortKeys((value as Record<string, unknown>)[k]);
  return out;
}
