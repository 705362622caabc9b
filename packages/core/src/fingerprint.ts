import { hash } from 'node:crypto';

/** SHA-256 of the payload: same id with a different fingerprint is a conflict. */
export function fingerprint(data: Buffer | string): Buffer {
  // One-shot: the same SHA-256 bytes as createHash(...).update(...).digest(), without a Hash object.
  return hash('sha256', data, 'buffer');
}
