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

/**
 * The headers of `now` that were not in `before` with the same value: what was set since a
 * snapshot (the route's own headers, as against those earlier hooks or middleware set for this
 * request). A header whose value changed counts as set.
 */
export function headersSince(
  now: Readonly<Record<string, OutgoingHttpHeader | undefined>>,
  before: HeaderPairs,
): [string, string][] {
  const earlier = groupHeaders(before);
  const out: [string, string][] = [];
  for (const [name, values] of groupHeaders(headerPairs(now))) {
    const prior = earlier.get(name);
    if (prior !== undefined && prior.length === values.length && prior.every((v, i) => v === values[i]))
      continue;
    for (const v of values) out.push([name, v]);
  }
  return out;
}

/**
 * Sets `pairs` through `set` (a Node response's `setHeader`, a Fastify reply's `header`), a
 * repeated name's values as one array; a name set here replaces what was held under it.
 */
export function setHeaderPairs(
  set: (name: string, value: string | string[]) => unknown,
  pairs: HeaderPairs,
): void {
  for (const [name, values] of groupHeaders(pairs))
    set(name, values.length === 1 ? (values[0] as string) : values);
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
