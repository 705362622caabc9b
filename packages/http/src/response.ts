import type { HeaderPairs, HttpResponseData } from './types.js';

/**
 * Headers never stored with a key: the hop-by-hop ones (RFC 9110 §7.6.1), which belong to one
 * connection, and those the server writes fresh for every response (`date`, and `content-length`,
 * which follows the body).
 */
const NOT_STORED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'date',
  'content-length',
]);

/**
 * Statuses never stored although below 500: 408, 409, 425 and 429 say the request may well
 * succeed if simply sent again; 304 answers this request's condition (`If-None-Match`, which
 * @fastify/etag honours), not the request, and has no body to replay to a retry without it.
 */
const NEVER_STORED = new Set([304, 408, 409, 425, 429]);

/** Whether a response of `status` is kept with its key and replayed (2xx, 3xx but 304, 4xx but 408/409/425/429). */
export function isStorable(status: number): boolean {
  return status < 500 && !NEVER_STORED.has(status);
}

/** The headers stored with a key: lower-cased, without hop-by-hop ones and those named by `connection`. */
export function storableHeaders(headers: HeaderPairs): Array<[string, string]> {
  const named = new Set(
    headers
      .filter(([n]) => n.toLowerCase() === 'connection')
      .flatMap(([, v]) => v.split(',').map((t) => t.trim().toLowerCase())),
  );
  const out: Array<[string, string]> = [];
  for (const [name, value] of headers) {
    const n = name.toLowerCase();
    if (!NOT_STORED.has(n) && !named.has(n)) out.push([n, value]);
  }
  return out;
}

/** A stored response as a replay sends it: the stored headers and bytes, with the replay marker. */
export function replayOf(stored: HttpResponseData, marker: string | false): HttpResponseData {
  return {
    status: stored.status,
    headers: marker === false ? stored.headers : [...stored.headers, [marker, 'true']],
    body: stored.body,
  };
}

/** Checks what a route handler answered: an integer status 200-599, header pairs of strings, bytes. */
export function checkResponse(r: HttpResponseData): string | undefined {
  if (typeof r !== 'object' || r === null) return 'the handler answered no response';
  if (!Number.isInteger(r.status) || r.status < 200 || r.status > 599) {
    return `the handler answered status ${String(r.status)}; idempotent routes answer 200-599`;
  }
  if (!(r.body instanceof Uint8Array)) return 'the response body must be bytes (a Uint8Array)';
  if (
    !Array.isArray(r.headers) ||
    r.headers.some((h) => typeof h?.[0] !== 'string' || typeof h?.[1] !== 'string')
  ) {
    return 'the response headers must be [name, value] pairs of strings';
  }
  return undefined;
}
