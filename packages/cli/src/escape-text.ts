/**
 * Text that came from the database or the command line, made safe for a terminal. Message ids,
 * error messages and bodies are written by producers, so they may hold an ESC sequence or a C1
 * control (U+009B is a whole CSI) that erases, moves or rewrites what an operator sees, or a
 * newline that forges a row. Every C0 control, DEL and every C1 control is written as JSON
 * writes it (`\n`, `\t`, `\u001b`, `\u009b`); everything else, backslashes included, is left as
 * it is, so printable text reads unchanged. The escape is idempotent: its output holds no
 * control character. `--json` shows any value exactly.
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;

/** JSON's two-character escapes; the other controls are `\u00XX`. */
const NAMED: Readonly<Record<string, string>> = Object.freeze({
  '\b': '\\b',
  '\t': '\\t',
  '\n': '\\n',
  '\f': '\\f',
  '\r': '\\r',
});

/** One control character as JSON escapes it, C1 and DEL included (which JSON.stringify leaves raw). */
export function escapeControl(char: string): string {
  return NAMED[char] ?? `\\u${(char.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`;
}

/** One cell or one line: every control character escaped, newlines too. */
export function escapeText(text: string): string {
  return text.replace(CONTROL, escapeControl);
}

/**
 * A whole report of several lines: every control character escaped except the newline. The
 * last guard before a terminal; the values in it were escaped with {@link escapeText} already.
 */
export function escapeLines(text: string): string {
  return text.replace(CONTROL_BUT_NEWLINE, escapeControl);
}

/** Where escaped text would hide or blur its edges: empty, a blank at either end, or a leading quote. */
const AMBIGUOUS_EDGE = /^$|^[\s"]|\s$/u;

/**
 * A name an operator may type back (a message id, a consumer, a step, a destination, a lease
 * owner), for one cell of text output. As {@link escapeText}, but a name that, escaped, is empty,
 * begins or ends with a blank (any Unicode white space), or begins with `"` is written as a JSON string
 * literal instead: a table line drops trailing blanks and a terminal shows none, so `p- ` would
 * read as `p-`, another id. The quoted form has no control character either; `--json` shows
 * every name exactly.
 */
export function showName(name: string): string {
  const escaped = escapeText(name);
  return AMBIGUOUS_EDGE.test(escaped) ? JSON.stringify(name).replace(CONTROL, escapeControl) : escaped;
}
