// @ts-check
// The consumer's side of the mail API: one POST with the step's idempotency key. A network error
// or a 5xx is transient (the message is retried and the step calls again, with the same key); a
// 4xx other than 409/429 says the request itself is wrong, which no retry fixes.
import { PermanentError } from '@once/core';

/** How long one call may take before it counts as lost. */
const CALL_TIMEOUT_MS = 5_000;

/**
 * @typedef {object} Email
 * @property {string} to
 * @property {string} subject
 * @property {string} text
 * @property {string} reference what the email is about (here the message id), kept by the provider
 */

/**
 * Sends one email; resolves with the provider's id for it.
 * @param {string} apiUrl base URL of the mail API
 * @param {Email} email
 * @param {{ idempotencyKey: string, signal: AbortSignal }} call
 * @returns {Promise<{ id: string, replayed: boolean }>}
 */
export async function sendMail(apiUrl, email, { idempotencyKey, signal }) {
  let res;
  try {
    res = await fetch(`${apiUrl}/v1/emails`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify(email),
      signal: AbortSignal.any([signal, AbortSignal.timeout(CALL_TIMEOUT_MS)]),
    });
  } catch (err) {
    // The email may or may not have gone out: only a retry with the same key can tell.
    throw new Error(`no answer from the mail API: ${/** @type {Error} */ (err).message}`, { cause: err });
  }
  const body = /** @type {{ id?: unknown, error?: unknown }} */ (await res.json().catch(() => ({})));
  if (res.ok && typeof body.id === 'string')
    return { id: body.id, replayed: res.headers.get('idempotent-replayed') === 'true' };
  const why = `the mail API answered ${res.status}: ${String(body.error ?? 'no error given')}`;
  if (res.status >= 400 && res.status < 500 && res.status !== 409 && res.status !== 429)
    throw new PermanentError(why);
  throw new Error(why);
}
