import { createHash } from 'node:crypto';

/** SHA-256 of the payload: same id with a different fingerprint is a conflict. */
export function fingerprint(data: Buffer | string): Buffer {
  return createHash('sha256').update(data).digest();
}
