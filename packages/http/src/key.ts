import { parseItem } from 'structured-headers';

/** Why a key was refused (each is a 400 problem naming it). */
export type KeyProblem = 'empty' | 'too-long' | 'obs-text' | 'invalid';

/** A parsed `Idempotency-Key`: the key, or why it was refused. */
export type ParsedKey =
  | { readonly ok: true; readonly key: string }
  | { readonly ok: false; readonly problem: KeyProblem; readonly detail: string };

// An RFC 9110 token: what Stripe's clients send bare (a UUID does not start with a letter, so it
// is not a structured-field token, but it is an HTTP token).
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// obs-text (RFC 9110 §5.5): bytes 0x80-0xFF, which Node hands over as latin1 characters.
const OBS_TEXT = /[\u0080-\u00ff]/;
const OWS = /^[ \t]+|[ \t]+$/g;

/**
 * Parses an `Idempotency-Key` field value as draft-ietf-httpapi-idempotency-key-header-07 defines
 * it (a structured-field String, RFC 9651 §3.3.3, parameters ignored), and also as a bare RFC
 * 9110 token, which is what Stripe's clients send. Both forms give the same key: `"abc-1"` and
 * `abc-1` are one key. The key is at most `maxLength` characters of printable ASCII.
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
        'the Idempotency-Key header is not a valid structured-field string (RFC 9651)',
      );
    }
    if (typeof item[0] !== 'string') {
      return refuse('invalid', 'the Idempotency-Key header is not a structured-field string (RFC 9651)');
    }
    key = item[0];
  } else if (raw === '') {
    key = '';
  } else if (TOKEN.test(raw)) {
    key = raw;
  } else {
    return refuse(
      'invalid',
      'the Idempotency-Key header is neither a quoted structured-field string nor a token (one key per request)',
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
