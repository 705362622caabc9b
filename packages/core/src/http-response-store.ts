import { quoteIdentifier } from './identifier.js';
import type { PgPoolLike } from './pg-like.js';
import { httpSql } from './sql/http.js';

/** An HTTP response as `@once/http` stores it with a key: status, header pairs, body bytes. */
export interface StoredHttpResponse {
  status: number;
  headers: Array<[string, string]>;
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

/**
 * What a key's row holds: `absent` (purged, or never committed), `response` (complete, with its
 * stored response), or `other` (a row without one: in progress, failed, or a message row).
 */
export type StoredHttpRow =
  | { readonly state: 'absent' }
  | { readonly state: 'response'; readonly response: StoredHttpResponse }
  | { readonly state: 'other'; readonly status: string };

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
 * Reads `@once/http`'s stored responses, with the SQL kept in core with the schema it belongs to.
 * The responses are written by the inbox itself (`createHttpInbox`), with the key's COMMIT.
 */
export class HttpResponseStore {
  readonly #sql: ReturnType<typeof httpSql>;

  /** `schema`: once's schema name, unquoted (it is validated and quoted here). */
  constructor(schema: string) {
    this.#sql = httpSql(quoteIdentifier(schema));
  }

  /** Reads a key's row for a replay. */
  async read(pool: PgPoolLike, consumer: string, id: string): Promise<StoredHttpRow> {
    const res = await pool.query<{
      status: string;
      response_status: number | null;
      response_headers: Array<[string, string]> | null;
      response_body: Buffer | null;
    }>(this.#sql.readResponse, [consumer, id]);
    const row = res.rows[0];
    if (!row) return { state: 'absent' };
    const response = responseOfRow(row);
    if (row.status !== 'done' || !response) return { state: 'other', status: row.status };
    return { state: 'response', response };
  }
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
