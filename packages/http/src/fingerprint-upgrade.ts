import { createHash } from 'node:crypto';
import type { PgPoolLike } from '@once/core';
import { findInboxRow } from '@once/core/admin';
import { fingerprintInputV1 } from './fingerprint-v1.js';
import type { IdempotentRequest } from './types.js';

/**
 * The fingerprint input of `request` as a build of fingerprint version 1 computed it, when the
 * key's row (`consumer`, `id`) was stored by such a build for this very request; else undefined.
 *
 * Asked only when the claim found the key under another fingerprint (a 422 in the making): a
 * version-1 row holds `SHA-256(fingerprintInputV1(...))`, which no version-2 input can equal (the
 * version tag leads both), so the request is first compared as it is now and then, once, as the
 * old build saw it. One read of the row, on the path of a mismatch only.
 */
export async function legacyInputOf(
  pool: PgPoolLike,
  schema: string,
  consumer: string,
  id: string,
  request: IdempotentRequest,
  headers: readonly string[],
): Promise<Buffer | undefined> {
  const row = await findInboxRow(pool, schema, { consumer, messageId: id });
  if (row === undefined) return undefined;
  const input = fingerprintInputV1(request, headers);
  const sha = createHash('sha256').update(input).digest();
  return Buffer.from(row.fingerprint).equals(sha) ? input : undefined;
}
