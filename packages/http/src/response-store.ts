import type { PgPoolLike } from '@once/core';
import type { StoredHttpResponse } from '@once/core/adapter';
import { findInboxRow } from '@once/core/admin';

/**
 * What a key's row holds: `absent` (purged, or never committed), `response` (complete, with its
 * stored response), or `other` (a row without one: in progress, failed, or a message row).
 */
export type StoredHttpRow =
  | { readonly state: 'absent' }
  | { readonly state: 'response'; readonly response: StoredHttpResponse }
  | { readonly state: 'other'; readonly status: string };

/**
 * Reads a key's stored response for a replay, through core's row lookup (`@once/core/admin`): the
 * SQL stays in core with the schema it belongs to. The responses are written by the inbox itself
 * (`createHttpInbox`), with the key's COMMIT.
 */
export async function readStoredResponse(
  pool: PgPoolLike,
  schema: string,
  consumer: string,
  id: string,
): Promise<StoredHttpRow> {
  const row = await findInboxRow(pool, schema, { consumer, messageId: id });
  if (!row) return { state: 'absent' };
  if (row.status !== 'done' || !row.response) return { state: 'other', status: row.status };
  return { state: 'response', response: row.response };
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
