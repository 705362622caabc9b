/**
 * `@once/http`: `Idempotency-Key` for HTTP endpoints on once's PostgreSQL inbox, outbox and
 * steps. The key's claim, the handler's writes, its outbox rows and the stored response commit in
 * one transaction, and the response is sent only after COMMIT; a retry with the same key gets the
 * stored response back. This entry point is the framework-neutral engine; the bindings are
 * `@once/http/fetch`, `@once/http/node`, `@once/http/fastify` and `@once/http/express`.
 * See docs/http.md.
 *
 * ```ts
 * const idempotency = createIdempotency({ pool, consumer: 'payments.http', outbox });
 * const charges = idempotentFetch(idempotency, { scope: (req) => userOf(req), handler: async (req, ctx) => { ... } });
 * ```
 */
export { createIdempotency, Idempotency } from './engine.js';
export { canonicalBody, FINGERPRINT_VERSION, fingerprintInput } from './fingerprint.js';
export { type KeyProblem, type ParsedKey, parseIdempotencyKey } from './key.js';
export {
  DEFAULT_IDEMPOTENCY_OPTIONS,
  type IdempotencyOptions,
  MAX_KEY_LENGTH,
  type RequestRouter,
  type ResolvedIdempotencyOptions,
} from './options.js';
export { HttpProblem, problemResponse, stripeProblemFormat } from './problem.js';
export type { FormattedProblem, ProblemDetails, ProblemFormat } from './problem-details.js';
export { isStorable, storableHeaders } from './response.js';
export { MAX_ENCODED_SCOPE_LENGTH, messageIdOf } from './scope.js';
export { canonicalTarget } from './target.js';
export type {
  HandleResult,
  HandleStatus,
  HeaderPairs,
  HttpResponseData,
  IdempotentContext,
  IdempotentRequest,
  RouteOptions,
  RunHandler,
} from './types.js';
