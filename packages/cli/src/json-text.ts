import { escapeControl } from './escape-text.js';

// JSON.stringify escapes C0 but writes DEL and C1 (U+009B is a terminal's CSI) raw. In JSON text
// they can only stand inside a string, where `\u00XX` means the same character.
const DEL_AND_C1 = /[\u007f-\u009f]/g;

/**
 * `JSON.stringify(value, null, indent)` with DEL and C1 escaped as well: the same value for a
 * JSON parser, and no control character for a terminal that shows it (`once … --json` on a
 * terminal, a log viewer). `undefined` is `null`.
 */
export function jsonText(value: unknown, indent?: number): string {
  return (JSON.stringify(value, null, indent) ?? 'null').replace(DEL_AND_C1, escapeControl);
}

/** A string quoted for a message: a JSON string literal with no control character in it. */
export function quote(text: string): string {
  return jsonText(text);
}
