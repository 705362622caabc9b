/**
 * The storage boundary for JSON values: what once writes into a `jsonb` column goes through
 * {@link toJsonb}, and what it reads back through {@link fromJsonb}.
 *
 * jsonb cannot hold every string JavaScript can: a NUL (`\u0000`) is refused ("unsupported Unicode
 * escape sequence") and so is a lone UTF-16 surrogate ("Unicode low surrogate must follow a high
 * surrogate"). A handler's error message quoting a binary body, a header with a NUL, a result with
 * a broken string: each would make the INSERT fail, and with it the record that ends the message.
 * So such strings, and object keys holding them, are stored in a tagged form that decodes back to
 * the exact same value. Everything else is stored as plain JSON, unchanged, so operators reading
 * the tables with SQL see what they expect.
 *
 * The tag is an object with the key `$once`. A user's own object that has a `$once` key is tagged
 * too, so decoding never mistakes user data for a tag. Ids, bodies and fingerprints never pass
 * through here: they are stored as they are (text and bytea) or refused.
 */

const TAG = '$once';

/** A stored string that jsonb could not hold: its UTF-16 code units, as hex. */
interface TaggedString {
  [TAG]: 'str';
  u16: string;
}
/** An object whose keys needed encoding, or that had a `$once` key of its own. */
interface TaggedObject {
  [TAG]: 'obj';
  entries: [unknown, unknown][];
}

// Either a NUL or a surrogate half. A well-formed pair is fine for jsonb; the slow path below
// tells pairs from lone halves exactly.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding NUL is the point.
const SUSPECT = /[\u0000\ud800-\udfff]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
// JSON.stringify writes NUL and lone surrogates as escapes; a tag key is written as it is.
const SUSPECT_JSON = /\\u0000|\\ud[89a-f]|"\$once"/i;

/** True when jsonb can store the string as it is. */
export function isJsonbSafeString(s: string): boolean {
  if (!SUSPECT.test(s)) return true;
  if (s.includes('\0')) return false;
  return !LONE_SURROGATE.test(s);
}

/**
 * The JSON text to store for `value`, or `null` when JSON.stringify gives nothing (undefined, a
 * function, a symbol). Throws what JSON.stringify throws (a cycle, a BigInt).
 */
export function toJsonb(value: unknown): string | null {
  const text = JSON.stringify(value);
  if (text === undefined) return null;
  // Fast path: nothing suspect in the text, so nothing to tag. A false alarm (an escaped backslash
  // followed by `u0000`) only costs the walk below.
  if (!SUSPECT_JSON.test(text)) return text;
  return JSON.stringify(encode(JSON.parse(text)));
}

function encode(v: unknown): unknown {
  if (typeof v === 'string') return isJsonbSafeString(v) ? v : tagString(v);
  if (Array.isArray(v)) return v.map(encode);
  if (v === null || typeof v !== 'object') return v;
  const keys = Object.keys(v);
  const plain = keys.every((k) => k !== TAG && isJsonbSafeString(k));
  const obj = v as Record<string, unknown>;
  // Object.fromEntries defines own properties, so a `__proto__` key stays a key.
  if (plain) return Object.fromEntries(keys.map((k) => [k, encode(obj[k])]));
  const tagged: TaggedObject = { [TAG]: 'obj', entries: keys.map((k) => [encode(k), encode(obj[k])]) };
  return tagged;
}

function tagString(s: string): TaggedString {
  const u16 = Buffer.alloc(s.length * 2);
  for (let i = 0; i < s.length; i++) u16.writeUInt16BE(s.charCodeAt(i), i * 2);
  return { [TAG]: 'str', u16: u16.toString('hex') };
}

/** The value {@link toJsonb} was given, from what node-postgres read back (already parsed). */
export function fromJsonb<T = unknown>(stored: unknown): T {
  return decode(stored) as T;
}

function decode(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(decode);
  if (v === null || typeof v !== 'object') return v;
  const obj = v as Record<string, unknown>;
  const tag = obj[TAG];
  if (tag === 'str' && typeof obj.u16 === 'string') return untagString(obj.u16);
  if (tag === 'obj' && Array.isArray(obj.entries)) {
    return Object.fromEntries(
      (obj.entries as [unknown, unknown][]).map(([k, x]) => [String(decode(k)), decode(x)]),
    );
  }
  return Object.fromEntries(Object.keys(obj).map((k) => [k, decode(obj[k])]));
}

function untagString(hex: string): string {
  const bytes = Buffer.from(hex, 'hex');
  let s = '';
  for (let i = 0; i + 1 < bytes.length; i += 2) s += String.fromCharCode(bytes.readUInt16BE(i));
  return s;
}
