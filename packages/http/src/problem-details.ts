/** The problems `@once/http` answers itself, as RFC 9457 problem types (anchors in docs/http.md). */
export const HttpProblem = {
  KeyMissing: 'key-missing',
  KeyInvalid: 'key-invalid',
  KeyInFlight: 'key-in-flight',
  KeyMismatch: 'key-mismatch',
  HandlerFailed: 'handler-failed',
  Unavailable: 'unavailable',
  Unroutable: 'unroutable',
} as const;
/** One of {@link HttpProblem}'s values. */
export type HttpProblem = (typeof HttpProblem)[keyof typeof HttpProblem];

/**
 * An answer `@once/http` writes itself (a refused key, a key in flight or reused, a failed,
 * unavailable or unroutable request), as the `formatProblem` option receives it. The status and headers of the
 * answer (`Retry-After`) are fixed; the format chooses only the body and its media type.
 */
export interface ProblemDetails {
  /** The answer's status: 400, 409, 422, 500 or 503. */
  readonly status: number;
  /** What went wrong: `key-missing`, `key-invalid`, `key-in-flight`, `key-mismatch`, `handler-failed`, `unavailable` or `unroutable`. */
  readonly problem: HttpProblem;
  /** The problem type URI (RFC 9457 `type`): docs/http.md with the problem as its anchor. */
  readonly type: string;
  /** A short summary, the same for every answer of this problem. */
  readonly title: string;
  /** This answer's explanation, saying what to do next. */
  readonly detail: string;
}

/** What a {@link ProblemFormat} returns: the body of the answer and its media type. */
export interface FormattedProblem {
  /** The `Content-Type` of `body`, e.g. `application/json`. */
  readonly contentType: string;
  /** The body: a string is sent as UTF-8. */
  readonly body: string | Uint8Array;
}

/**
 * Writes the body of the answers `@once/http` writes itself, for clients that expect another error
 * shape than RFC 9457 problem+json (e.g. `stripeProblemFormat` for Stripe's SDKs).
 */
export type ProblemFormat = (problem: ProblemDetails) => FormattedProblem;
