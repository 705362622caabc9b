import type { HttpResponseData } from './types.js';

/** The problems `@once/http` answers itself, as RFC 9457 problem types (anchors in docs/http.md). */
export const HttpProblem = {
  KeyMissing: 'key-missing',
  KeyInvalid: 'key-invalid',
  KeyInFlight: 'key-in-flight',
  KeyMismatch: 'key-mismatch',
  HandlerFailed: 'handler-failed',
  Unavailable: 'unavailable',
} as const;
export type HttpProblem = (typeof HttpProblem)[keyof typeof HttpProblem];

const TITLES: Record<HttpProblem, string> = {
  'key-missing': 'Idempotency-Key is missing',
  'key-invalid': 'Idempotency-Key is invalid',
  'key-in-flight': 'A request with this Idempotency-Key is in progress',
  'key-mismatch': 'Idempotency-Key reused with a different request',
  'handler-failed': 'The request failed and was not recorded; retry it with the same key',
  unavailable: 'The idempotency store is unavailable; retry with the same key',
};

const DOCS = 'https://github.com/once-dev/once/blob/main/docs/http.md#';

/** A problem+json response (RFC 9457) of `status`, with extra headers (`Retry-After`). */
export function problemResponse(
  status: number,
  problem: HttpProblem,
  detail: string,
  headers: ReadonlyArray<readonly [string, string]> = [],
): HttpResponseData {
  const body = Buffer.from(
    JSON.stringify({ type: `${DOCS}${problem}`, title: TITLES[problem], status, detail }),
  );
  return {
    status,
    headers: [['content-type', 'application/problem+json'], ...headers],
    body,
  };
}
