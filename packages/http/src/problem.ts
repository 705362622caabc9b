import type { HttpProblem, ProblemDetails, ProblemFormat } from './problem-details.js';
import type { HttpResponseData } from './types.js';

export { HttpProblem } from './problem-details.js';

const TITLES: Record<HttpProblem, string> = {
  'key-missing': 'Idempotency-Key is missing',
  'key-invalid': 'Idempotency-Key is invalid',
  'key-in-flight': 'A request with this Idempotency-Key is in progress',
  'key-mismatch': 'Idempotency-Key reused with a different request',
  'handler-failed': 'The request failed and was not recorded; retry it with the same key',
  unavailable: 'The idempotency store is unavailable; retry with the same key',
  unroutable: 'The request could not be placed in a database; nothing was recorded',
};

const DOCS = 'https://github.com/once-dev/once/blob/main/docs/http.md#';
// What a header value may not hold (RFC 9110 §5.5): control characters other than tab.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/**
 * A problem+json response (RFC 9457) of `status`, with extra headers (`Retry-After`). It carries
 * its {@link ProblemDetails} as `problem`, from which the `formatProblem` option writes another body.
 */
export function problemResponse(
  status: number,
  problem: HttpProblem,
  detail: string,
  headers: ReadonlyArray<readonly [string, string]> = [],
): HttpResponseData {
  const details: ProblemDetails = {
    status,
    problem,
    type: `${DOCS}${problem}`,
    title: TITLES[problem],
    detail,
  };
  return {
    status,
    headers: [['content-type', 'application/problem+json'], ...headers],
    body: Buffer.from(JSON.stringify(problemJson(details))),
    problem: details,
  };
}

/** The RFC 9457 document of a problem: the default format. */
function problemJson(p: ProblemDetails): object {
  return { type: p.type, title: p.title, status: p.status, detail: p.detail };
}

/**
 * `response` with its body written by `format` when it is an answer `@once/http` wrote itself (it
 * has `problem`); any other response, or every response without a format, as it is. The status
 * and the other headers stay. A format that throws, or returns something unusable, leaves the
 * problem+json answer and reports the error to `onError`.
 */
export function formatProblem(
  response: HttpResponseData,
  format: ProblemFormat | undefined,
  onError: (err: unknown) => void,
): HttpResponseData {
  const problem = response.problem;
  if (format === undefined || problem === undefined) return response;
  let out: ReturnType<ProblemFormat>;
  try {
    out = format(problem);
    if (typeof out?.contentType !== 'string' || CONTROL.test(out.contentType)) {
      throw new TypeError('formatProblem must return { contentType: string, body }');
    }
    if (typeof out.body !== 'string' && !(out.body instanceof Uint8Array)) {
      throw new TypeError('formatProblem must return a string or Uint8Array body');
    }
  } catch (err) {
    onError(err);
    return response;
  }
  return {
    status: response.status,
    headers: [
      ['content-type', out.contentType],
      ...response.headers.filter(([name]) => name.toLowerCase() !== 'content-type'),
    ],
    body: typeof out.body === 'string' ? Buffer.from(out.body, 'utf8') : out.body,
    problem,
  };
}

// Stripe's error types, by the problem once answers (stripe.com/docs/api/errors): the SDKs pick
// the class they throw from `error.type` (StripeIdempotencyError, StripeInvalidRequestError, ...).
const STRIPE_TYPES: Record<HttpProblem, string> = {
  'key-missing': 'invalid_request_error',
  'key-invalid': 'invalid_request_error',
  'key-in-flight': 'idempotency_error',
  'key-mismatch': 'idempotency_error',
  'handler-failed': 'api_error',
  unavailable: 'api_error',
  unroutable: 'api_error',
};

/**
 * A {@link ProblemFormat} in Stripe's error shape, `{"error":{"type","code","message","doc_url"}}`,
 * for clients written against Stripe's API (its SDKs throw only for a body with an `error`
 * member, and would otherwise take a problem+json refusal for the resource they asked for).
 * `type` is Stripe's (`idempotency_error` for a key reused or in flight, `invalid_request_error`
 * for a missing or invalid key, `api_error` for a failed, unavailable or unroutable request), `code` is
 * once's problem name, `message` its detail.
 */
export const stripeProblemFormat: ProblemFormat = (p) => ({
  contentType: 'application/json',
  body: JSON.stringify({
    error: { type: STRIPE_TYPES[p.problem], code: p.problem, message: p.detail, doc_url: p.type },
  }),
});
