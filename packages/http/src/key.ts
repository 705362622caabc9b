import { parseItem } from 'structured-headers';

/** Why a key was refused (each is a 400 problem naming it). */
export type KeyProblem = 'empty' | 'too-long' | 'obs-text' | 'invalid';

/** A parsed `Idempotency-Key`: the key, or why it was refused. */
export type ParsedKey =
  | {
      /** The header held one usable key. */
      readonly ok: true;
      /** The key: the bare value, or a quoted one's contents, without surrounding whitespace. */
      readonly key: string;
    }
  | {
      /** The header was refused: the request is answered 400. */
      readonly ok: false;
      /** Why it was refused. */
      readonly problem: KeyProblem;
      /** The sentence the 400 problem's `detail` says to the client. */
      readonly detail: string;
    };

// A bare key: printable ASCII, as Stripe accepts, but for the comma: HTTP joins two fields of one
// name with a comma (RFC 9110 §5.3), so `a, b` may be two keys and is refused; a key holding a
// comma is sent quoted (`"a,b"`).
const BARE = /^[\x20-\x2b\x2d-\x7e]+$/;
// obs-text (RFC 9110 §5.5): bytes 0x80-0xFF, which Node hands over as latin1 characters.
const OBS_TEXT = /[\u0080-\u00ff]/;
const OWS = /^[ \t]+|[ \t]+$/g;

/**
 * Parses an `Idempotency-Key` field value as draft-ietf-httpapi-idempotency-key-header-07 defines
 * it (a structured-field String, RFC 9651 §3.3.3, parameters ignored), and also bare, as Stripe's
 * clients send it: any printable ASCII but a comma (`order:42`, `a b`, `x/y=z@w`). Both forms give
 * the same key: `"abc-1"` and `abc-1` are one key. A value that starts with `"` is the quoted form.
 * Whitespace around the value is not part of the key (HTTP strips it before anyone sees it). The
 * key is at most `maxLength` characters of printable ASCII.
 */
export function parseIdempotencyKey(value: string, maxLength: number): ParsedKey {
  const raw = value.replace(OWS, '');
  if (OBS_TEXT.test(raw)) {
    return refuse(
      'obs-text',
      'the Idempotency-Key header holds bytes outside ASCII (obs-text); use printable ASCII',
    );
  }
  let key: string;
  if (raw.startsWith('"')) {
    let item: ReturnType<typeof parseItem>;
    try {
      item = parseItem(raw);
    } catch {
      return refuse(
        'invalid',
        'the Idempotency-Key header starts with a quote but is not a valid structured-field string (RFC 9651)',
      );
    }
    if (typeof item[0] !== 'string') {
      return refuse('invalid', 'the Idempotency-Key header is not a structured-field string (RFC 9651)');
    }
    key = item[0];
  } else if (raw === '') {
    key = '';
  } else if (BARE.test(raw)) {
    key = raw;
  } else if (raw.includes(',')) {
    return refuse(
      'invalid',
      'the Idempotency-Key header holds a comma: two keys, or a list (send one key; quote a key that holds a comma: "a,b")',
    );
  } else {
    return refuse(
      'invalid',
      'the Idempotency-Key header holds control characters or characters outside ASCII; use printable ASCII',
    );
  }
  if (key.length === 0) return refuse('empty', 'the Idempotency-Key header is empty');
  if (key.length > maxLength) {
    return refuse(
      'too-long',
      `the Idempotency-Key is ${key.length} characters long; the most is ${maxLength}`,
    );
  }
  return { ok: true, key };
}

function refuse(problem: KeyProblem, detail: string): ParsedKey {
  return { ok: false, problem, detail };
}
