/**
 * SQL literals, for the statements that cannot take parameters: a message's claim travels in the
 * same simple-query round trip as BEGIN (the simple protocol has no parameters), which saves a
 * quarter of a single message's round trips and one per batch (the batch's ids and fingerprints
 * go as literal arrays); the relay's round does the same with its claim (a row limit) and with its
 * mark-sent and COMMIT (row numbers read from the table), integers only; and `schemaSql()`, a
 * script for the user's own migration tool, quotes its migrations' names with it. Nothing else in
 * core builds SQL from values.
 *
 * Safety rests on three facts: node-postgres always speaks UTF-8 (no multibyte encoding can hide
 * a quote or backslash byte); a string holding a backslash is written as E'…' with every
 * backslash doubled, so it reads the same whatever `standard_conforming_strings` says; and NUL,
 * which would end the query string early, is refused before we get here (ids cannot hold it).
 */

import type { FingerprintHex } from '../message/fingerprint.js';
export function quoteLiteral(value: string): string {
  if (value.includes('\0')) throw new Error('a SQL literal cannot hold NUL');
  const quoted = `'${value.replaceAll("'", "''")}'`;
  return value.includes('\\') ? `E${quoted.replaceAll('\\', '\\\\')}` : quoted;
}

/** A bytea literal without backslashes: `decode('<hex>', 'hex')`. */
export function byteaLiteral(value: Buffer): string {
  return `decode('${value.toString('hex')}', 'hex')`;
}

/**
 * The bytea literal of a fingerprint: `decode('<hex>', 'hex')`. The type admits only what
 * `fingerprintHex` returned (hex digits), so nothing is checked per message.
 */
export function byteaHexLiteral(hex: FingerprintHex): string {
  return `decode('${hex}', 'hex')`;
}

/** A non-negative integer literal; anything else throws. */
export function integerLiteral(value: number): string {
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`not a non-negative integer: ${value}`);
  return String(value);
}

/** A `bigint[]` literal of decimal strings (bigint columns as node-postgres returns them); anything else throws. */
export function bigintArrayLiteral(values: readonly string[]): string {
  for (const v of values)
    if (!/^-?[0-9]{1,19}$/.test(v)) throw new Error(`not a bigint: ${JSON.stringify(v)}`);
  return `'{${values.join(',')}}'::bigint[]`;
}
