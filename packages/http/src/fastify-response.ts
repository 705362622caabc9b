import type { OutgoingHttpHeader } from 'node:http';
import type { HeaderPairs, HttpResponseData } from './types.js';

/**
 * Node's outgoing header map (what Fastify's `reply.getHeaders()` and `res.getHeaders()` return)
 * as name/value pairs: an array value (`set-cookie`) becomes one pair per element.
 */
export function headerPairs(
  headers: Readonly<Record<string, OutgoingHttpHeader | undefined>>,
): [string, string][] {
  const pairs: [string, string][] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) pairs.push([name, v]);
    else pairs.push([name, String(value)]);
  }
  return pairs;
}

/** Pairs grouped by lower-case name, a repeated name's values kept in order (for `setHeader`). */
export function groupHeaders(pairs: HeaderPairs): Map<string, string[]> {
  const grouped = new Map<string, string[]>();
  for (const [name, value] of pairs) {
    const key = name.toLowerCase();
    const values = grouped.get(key);
    if (values) values.push(value);
    else grouped.set(key, [value]);
  }
  return grouped;
}

/** The bytes of a buffered payload: a string as UTF-8, a Buffer or typed array as it is, none as empty. */
export function payloadBytes(payload: unknown): Uint8Array | undefined {
  if (payload === undefined || payload === null) return new Uint8Array(0);
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (payload instanceof Uint8Array) return payload;
  return undefined;
}

/** A response as a Buffer body (what Fastify and Node send without copying). */
export function bodyBuffer(response: HttpResponseData): Buffer {
  const b = response.body;
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}
