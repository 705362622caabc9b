import { createHash } from 'node:crypto';

/**
 * The message attribute that declares a body sent as base64 (value `base64`): bytes that SQS
 * cannot carry as text. once's SQS consumer decodes such a body back to the same bytes and does
 * not show the attribute among the headers; another consumer must decode it itself.
 */
export const BODY_ENCODING_ATTRIBUTE = 'once-body-encoding';

const SQS_TOKEN = /^[\x21-\x7e]{1,128}$/;
/**
 * True when SQS accepts the string as a message body: only #x9 | #xA | #xD | #x20 to #xD7FF |
 * #xE000 to #xFFFD | #x10000 to #x10FFFF (a well-formed surrogate pair); SQS refuses the rest.
 */
function isSqsText(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c < 0xd800) continue;
    if (c === 0x9 || c === 0xa || c === 0xd) continue;
    if (c >= 0xe000 && c <= 0xfffd) continue;
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
    }
    return false;
  }
  return true;
}

/**
 * The body as SQS text: the bytes themselves when they are UTF-8 that SQS accepts, else base64
 * (declared by {@link BODY_ENCODING_ATTRIBUTE}). Never a lossy conversion: `toString('utf8')`
 * would turn every invalid byte into U+FFFD without a word.
 */
export function sqsBody(body: Buffer | string): { text: string; base64: boolean } {
  if (typeof body === 'string') {
    if (isSqsText(body)) return { text: body, base64: false };
    return { text: Buffer.from(body, 'utf8').toString('base64'), base64: true };
  }
  const text = body.toString('utf8');
  // Invalid UTF-8 decodes to U+FFFD: only an exact round trip proves the bytes are text.
  if (isSqsText(text) && Buffer.from(text, 'utf8').equals(body)) {
    return { text, base64: false };
  }
  return { text: body.toString('base64'), base64: true };
}

/** A valid SQS dedup/group token: the value itself when it fits, else its SHA-256 (stable, 64 hex chars). */
export function sqsToken(value: string): string {
  return SQS_TOKEN.test(value) ? value : createHash('sha256').update(value).digest('hex');
}
