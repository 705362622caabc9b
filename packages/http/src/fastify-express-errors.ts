import { OnceError } from '@once/core';

/** The error codes of the Fastify and Express bindings. */
export const BindingErrorCode = {
  /** A response on an idempotent route was streamed (or hijacked): it would reach the client before COMMIT. */
  StreamingRefused: 'HTTP_STREAMING_REFUSED',
  /** Express: a body parser read the body without `keepRawBody`, so its bytes cannot be fingerprinted. */
  RawBodyMissing: 'HTTP_RAW_BODY_MISSING',
  /** Express: the body the middleware read itself is over `bodyLimitBytes`. */
  BodyTooLarge: 'HTTP_BODY_TOO_LARGE',
  /** `request.once` / `req.once` read on a route that is not idempotent. */
  NotIdempotent: 'HTTP_NOT_IDEMPOTENT',
} as const;
/** One of {@link BindingErrorCode}'s values: the `code` of the errors the Fastify and Express bindings throw. */
export type BindingErrorCode = (typeof BindingErrorCode)[keyof typeof BindingErrorCode];

/** A binding's typed error: a {@link OnceError} with one of {@link BindingErrorCode}, never retryable. */
export function bindingError(code: BindingErrorCode, message: string): OnceError {
  return new OnceError(code, message, { retryable: false });
}
