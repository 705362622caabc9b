import type { Tx } from './handler.js';
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
 * What a key's row holds: `absent` (purged, or never committed), `response` (complete, with its
 * stored response), or `other` (a row without one: in progress, failed, or a message row).
 */
export type StoredHttpRow =
  | { readonly state: 'absent' }
  | { readonly state: 'response'; readonly response: StoredHttpResponse }
  | { readonly state: 'other'; readonly status: string };

/**
 * The SQL `@once/http` runs against the inbox, kept in core with the schema it belongs to: the
 * savepoint a 4xx rolls back to, and the response stored with a key and read back for replays.
 */
export class HttpResponseStore {
  readonly #sql: ReturnType<typeof httpSql>;

  /** `schema`: once's schema name, unquoted (it is validated and quoted here). */
  constructor(schema: string) {
    this.#sql = httpSql(quoteIdentifier(schema));
  }

  /** Marks where the route handler's writes begin, in the key's transaction. */
  async savepoint(tx: Tx): Promise<void> {
    await tx.query(this.#sql.savepoint);
  }

  /** Undoes the handler's writes and outbox rows since {@link HttpResponseStore.savepoint}; the claim stays. */
  async rollbackToSavepoint(tx: Tx): Promise<void> {
    await tx.query(this.#sql.rollbackToSavepoint);
  }

  /** Stores the response on the key's row, in the key's transaction (it commits with the claim). */
  async store(tx: Tx, consumer: string, id: string, response: StoredHttpResponse): Promise<void> {
    const res = await tx.query(this.#sql.storeResponse, [
      consumer,
      id,
      response.status,
      JSON.stringify(response.headers),
      response.body,
    ]);
    if (res.rowCount !== 1) {
      throw new Error(`the key's row ${consumer}/${id} is missing from its own transaction`);
    }
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
    if (row.status !== 'done' || row.response_status === null) return { state: 'other', status: row.status };
    return {
      state: 'response',
      response: {
        status: row.response_status,
        headers: row.response_headers ?? [],
        body: row.response_body ?? Buffer.alloc(0),
      },
    };
  }
}
