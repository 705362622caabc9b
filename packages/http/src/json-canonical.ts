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
  const parser = new Parser(text);
  try {
    const value = parser.value(0);
    parser.whitespace();
    return parser.atEnd() ? value : undefined;
  } catch (err) {
    if (err === NOT_JSON) return undefined;
    throw err;
  }
}

// Thrown (and caught above) wherever the text leaves the grammar: one shared value, no stack.
const NOT_JSON = Symbol('not JSON');

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
// biome-ignore lint/suspicious/noControlCharactersInRegex: a raw control character ends the run (RFC 8259 §7)
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

class Parser {
  readonly #text: string;
  #at = 0;

  constructor(text: string) {
    this.#text = text;
  }

  atEnd(): boolean {
    return this.#at === this.#text.length;
  }

  whitespace(): void {
    const t = this.#text;
    let i = this.#at;
    for (;;) {
      const c = t.charCodeAt(i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      i++;
    }
    this.#at = i;
  }

  /** One value at the current position (after whitespace), as canonical text. */
  value(depth: number): string {
    this.whitespace();
    const t = this.#text;
    const c = t[this.#at];
    if (c === '{') return this.#object(depth + 1);
    if (c === '[') return this.#array(depth + 1);
    if (c === '"') return JSON.stringify(this.#string());
    if (c === 't') return this.#literal('true');
    if (c === 'f') return this.#literal('false');
    if (c === 'n') return this.#literal('null');
    NUMBER.lastIndex = this.#at;
    const m = NUMBER.exec(t);
    if (m === null) throw NOT_JSON;
    this.#at += m[0].length;
    return canonicalNumber(m[0]);
  }

  #literal(word: string): string {
    if (!this.#text.startsWith(word, this.#at)) throw NOT_JSON;
    this.#at += word.length;
    return word;
  }

  #object(depth: number): string {
    if (depth > MAX_JSON_DEPTH) throw NOT_JSON;
    this.#at++; // {
    const members = new Map<string, string>();
    this.whitespace();
    if (this.#text[this.#at] === '}') {
      this.#at++;
      return '{}';
    }
    for (;;) {
      this.whitespace();
      if (this.#text[this.#at] !== '"') throw NOT_JSON;
      const key = this.#string();
      if (members.has(key)) throw NOT_JSON;
      this.whitespace();
      if (this.#text[this.#at] !== ':') throw NOT_JSON;
      this.#at++;
      members.set(key, this.value(depth));
      this.whitespace();
      const next = this.#text[this.#at++];
      if (next === '}') break;
      if (next !== ',') throw NOT_JSON;
    }
    // Sorted by UTF-16 code units (the default sort): one order for every spelling of the object.
    const keys = [...members.keys()].sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${members.get(k)}`).join(',')}}`;
  }

  #array(depth: number): string {
    if (depth > MAX_JSON_DEPTH) throw NOT_JSON;
    this.#at++; // [
    this.whitespace();
    if (this.#text[this.#at] === ']') {
      this.#at++;
      return '[]';
    }
    const items: string[] = [];
    for (;;) {
      items.push(this.value(depth));
      this.whitespace();
      const next = this.#text[this.#at++];
      if (next === ']') break;
      if (next !== ',') throw NOT_JSON;
    }
    return `[${items.join(',')}]`;
  }

  /** A string token at the current position (on its opening quote), unescaped. */
  #string(): string {
    const t = this.#text;
    this.#at++; // "
    let out = '';
    for (;;) {
      PLAIN_RUN.lastIndex = this.#at;
      const run = PLAIN_RUN.exec(t) as RegExpExecArray;
      out += run[0];
      this.#at += run[0].length;
      const c = t[this.#at];
      if (c === '"') {
        this.#at++;
        return out;
      }
      if (c !== '\\') throw NOT_JSON; // the end of the text, or a control character
      const e = t[this.#at + 1];
      if (e === 'u') {
        const hex = t.slice(this.#at + 2, this.#at + 6);
        if (!HEX4.test(hex)) throw NOT_JSON;
        // One UTF-16 code unit per escape: a pair written as two escapes joins here, and a lone
        // surrogate stays one (JSON.stringify writes it back escaped, so it is never lost).
        out += String.fromCharCode(Number.parseInt(hex, 16));
        this.#at += 6;
        continue;
      }
      const plain = e === undefined ? undefined : ESCAPES[e];
      if (plain === undefined) throw NOT_JSON;
      out += plain;
      this.#at += 2;
    }
  }
}
