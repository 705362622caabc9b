/** An HTTP response as `@once/http` stores it with a key: status, header pairs, body bytes. */
export interface StoredHttpResponse {
  /** The HTTP status. */
  status: number;
  /** The stored header pairs, in order. */
  headers: Array<[string, string]>;
  /** The body's bytes. */
  body: Buffer;
}

/**
 * What the handler of an inbox made by `createHttpInbox` resolves with: the response to keep with
 * the key, and whether the handler's writes and outbox rows are rolled back first, to the savepoint
 * taken with the claim (a 4xx is kept as the answer to the request, but not its writes).
 */
export interface HttpResponseToStore extends StoredHttpResponse {
  /** Roll the handler's writes and outbox rows back to the claim's savepoint before storing (a 4xx). */
  undoWrites: boolean;
}

/** The stored response of a row's response columns, or undefined when it has none. */
export function responseOfRow(row: {
  response_status: number | null;
  response_headers: Array<[string, string]> | null;
  response_body: Buffer | null;
}): StoredHttpResponse | undefined {
  if (row.response_status === null) return undefined;
  return {
    status: row.response_status,
    headers: row.response_headers ?? [],
    body: row.response_body ?? Buffer.alloc(0),
  };
}

/**
 * Why `value` cannot be stored as a key's response (`createHttpInbox`'s handler resolved with
 * something else), or undefined when it can.
 */
export function httpResponseProblem(value: unknown): string | undefined {
  const r = value as Partial<HttpResponseToStore> | null | undefined;
  if (typeof r !== 'object' || r === null) return 'the handler of an HTTP inbox must resolve with a response';
  if (!Number.isInteger(r.status) || r.status! < 100 || r.status! > 999)
    return `response status ${String(r.status)} is not an HTTP status`;
  if (
    !Array.isArray(r.headers) ||
    r.headers.some((h) => !Array.isArray(h) || typeof h[0] !== 'string' || typeof h[1] !== 'string')
  )
    return 'response headers must be [name, value] pairs of strings';
  if (!Buffer.isBuffer(r.body)) return 'response body must be a Buffer';
  if (typeof r.undoWrites !== 'boolean') return 'undoWrites must be a boolean';
  return undefined;
}
