import { hash } from 'node:crypto';

/** SHA-256 of the payload: same id with a different fingerprint is a conflict. */
export function fingerprint(data: Buffer | string): Buffer {
  // One-shot, its digest handed over as a 'binary' (latin1) string, one char per byte, and copied into a
  // pooled Buffer: the same 32 bytes as createHash(...).update(...).digest(), at about a third of
  // the CPU of hash(..., 'buffer'), which gives every digest an ArrayBuffer of its own.
  return Buffer.from(hash('sha256', data, 'binary'), 'latin1');
}

/**
 * The same SHA-256 as {@link fingerprint}, as lowercase hex: what the claim's bytea literal
 * holds (`decode('<hex>', 'hex')`), with no Buffer made per message.
 */
export function fingerprintHex(data: Buffer | string): FingerprintHex {
  return hash('sha256', data, 'hex') as FingerprintHex;
}

/** A SHA-256 in lowercase hex, made by {@link fingerprintHex} only: safe in a SQL literal as it is. */
export type FingerprintHex = string & { readonly __fingerprintHex: unique symbol };

/** The bytes of a {@link fingerprintHex}, for a parameterised statement. */
export function hexBytes(hex: string): Buffer {
  return Buffer.from(hex, 'hex');
}
