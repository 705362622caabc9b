import { isUtf8 } from 'node:buffer';
import { canonicalNumber } from './json-number.js';

/**
 * Objects and arrays nested deeper than this are not taken as JSON (the body is then compared
 * byte for byte): a fixed bound keeps the answer the same on every call, where running out of
 * stack would depend on how deep the caller already was.
 */
export const MAX_JSON_DEPTH = 512;

/**
 * The canonical text of a body that is one JSON value (RFC 8259) in valid UTF-8 with no object
 * holding the same key twice; `undefined` for any other body. Two such bodies have the same
 * canonical text exactly when they are equal as JSON values: objects as sets of members (key
 * order and whitespace do not matter), arrays in order, strings by their characters (however
 * escaped), numbers by their exact decimal value ({@link canonicalNumber}).
 *
 * Stricter than `JSON.parse` where it matters for identity: invalid UTF-8 (which decoding would
 * turn into U+FFFD, so two different bodies would look alike), a byte-order mark, and repeated
 * keys (of which `JSON.parse` keeps the last, so two different bodies would parse alike) all
 * make the body "not JSON".
 */
export function canonicalJson(bytes: Uint8Array): string | undefined {
  if (bytes.length === 0 || !isUtf8(bytes)) return undefined;
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  try {
    return parse(text);
  } catch (err) {
    if (err === NOT_JSON) return undefined;
    throw err;
  }
}

// Thrown (and caught above) wherever the text leaves the grammar: one shared value, no stack.
const NOT_JSON = Symbol('not JSON');

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
// biome-ignore lint/suspicious/noControlCharactersInRegex: a raw control character ends a string (RFC 8259 §7)
const NEEDS_WORK = /[\\\u0000-\u001f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: a raw control character ends a string (RFC 8259 §7)
const PLAIN_RUN = /[^"\\\u0000-\u001f]*/y;
const HEX4 = /^[0-9A-Fa-f]{4}$/;
const ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

/** The canonical text of `text`, one JSON value with whitespace around it; throws NOT_JSON. */
function parse(text: string): string {
  const end = text.length;
  let at = 0;

  const whitespace = () => {
    for (;;) {
      const c = text.charCodeAt(at);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return;
      at++;
    }
  };

  /** A string token (at its opening quote), unescaped. */
  const string = (): string => {
    const start = ++at;
    const close = text.indexOf('"', start);
    if (close < 0) throw NOT_JSON;
    const plain = text.slice(start, close);
    if (!NEEDS_WORK.test(plain)) {
      at = close + 1;
      return plain;
    }
    let out = '';
    for (;;) {
      PLAIN_RUN.lastIndex = at;
      const run = PLAIN_RUN.exec(text) as RegExpExecArray;
      out += run[0];
      at += run[0].length;
      const c = text[at];
      if (c === '"') {
        at++;
        return out;
      }
      if (c !== '\\') throw NOT_JSON; // the end of the text, or a control character
      const e = text[at + 1];
      if (e === 'u') {
        const hex = text.slice(at + 2, at + 6);
        if (!HEX4.test(hex)) throw NOT_JSON;
        // One UTF-16 code unit per escape: a pair written as two escapes joins here, and a lone
        // surrogate stays one (JSON.stringify writes it back escaped, so it is never lost).
        out += String.fromCharCode(Number.parseInt(hex, 16));
        at += 6;
        continue;
      }
      const plainChar = e === undefined ? undefined : ESCAPES[e];
      if (plainChar === undefined) throw NOT_JSON;
      out += plainChar;
      at += 2;
    }
  };

  const value = (depth: number): string => {
    whitespace();
    const c = text.charCodeAt(at);
    if (c === 0x22) return JSON.stringify(string()); // "
    if (c === 0x7b) return object(depth + 1); // {
    if (c === 0x5b) return array(depth + 1); // [
    if (c === 0x74) return literal('true');
    if (c === 0x66) return literal('false');
    if (c === 0x6e) return literal('null');
    NUMBER.lastIndex = at;
    const m = NUMBER.exec(text);
    if (m === null) throw NOT_JSON;
    at += m[0].length;
    return canonicalNumber(m[0]);
  };

  const literal = (word: string): string => {
    if (!text.startsWith(word, at)) throw NOT_JSON;
    at += word.length;
    return word;
  };

  const object = (depth: number): string => {
    if (depth > MAX_JSON_DEPTH) throw NOT_JSON;
    at++; // {
    whitespace();
    if (text.charCodeAt(at) === 0x7d) {
      at++;
      return '{}';
    }
    const members: Array<[string, string]> = [];
    for (;;) {
      whitespace();
      if (text.charCodeAt(at) !== 0x22) throw NOT_JSON;
      const key = string();
      whitespace();
      if (text.charCodeAt(at) !== 0x3a) throw NOT_JSON; // :
      at++;
      members.push([key, value(depth)]);
      whitespace();
      const next = text.charCodeAt(at++);
      if (next === 0x7d) break; // }
      if (next !== 0x2c) throw NOT_JSON; // ,
    }
    // Sorted by UTF-16 code units: one order for every spelling of the object; a repeated key
    // (after unescaping) sits next to its twin.
    members.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    let out = '{';
    for (let i = 0; i < members.length; i++) {
      const [key, v] = members[i] as [string, string];
      if (i > 0) {
        if (key === (members[i - 1] as [string, string])[0]) throw NOT_JSON;
        out += ',';
      }
      out += `${JSON.stringify(key)}:${v}`;
    }
    return `${out}}`;
  };

  const array = (depth: number): string => {
    if (depth > MAX_JSON_DEPTH) throw NOT_JSON;
    at++; // [
    whitespace();
    if (text.charCodeAt(at) === 0x5d) {
      at++;
      return '[]';
    }
    let out = '[';
    for (let first = true; ; first = false) {
      if (!first) out += ',';
      out += value(depth);
      whitespace();
      const next = text.charCodeAt(at++);
      if (next === 0x5d) break; // ]
      if (next !== 0x2c) throw NOT_JSON; // ,
    }
    return `${out}]`;
  };

  const out = value(0);
  whitespace();
  if (at !== end) throw NOT_JSON;
  return out;
}
