import type { PublishOptions, StepFn, Tx } from '@once/core';
import type { ProblemDetails } from './problem-details.js';

/**
 * Response headers as name/value pairs, in order. A name may repeat (`set-cookie`). Names are
 * compared without regard to case; the engine stores them lower-cased.
 */
export type HeaderPairs = ReadonlyArray<readonly [name: string, value: string]>;

/**
 * The framework-neutral request a binding hands to {@link Idempotency.handle}. The binding
 * reads the whole body before calling (the fingerprint hashes it).
 */
export interface IdempotentRequest {
  /** The HTTP method as sent (`POST`); methods are case-sensitive (RFC 9110 §9.1). */
  readonly method: string;
  /**
   * The request target as the client sent it: the path and the query (`/accounts/A/charges?x=1`),
   * e.g. Node's `req.url`, Express's `req.originalUrl`, or a Fetch request URL's path and search.
   * Part of the request's identity, compared as RFC 3986 §6.2.2 compares URIs
   * ({@link canonicalTarget}): the same key on another resource, or with other query parameters,
   * is a 422.
   */
  readonly target: string;
  /**
   * A name for the route, added to the identity beside the target (never instead of it): the
   * pattern the framework matched (`/charges/:id`, on Fastify and Express) or the Fetch binding's
   * `route` option. Also what the first fingerprint version (`once-http/1`) named the route by, so
   * a key stored by a build that used it is still recognised (docs/http.md, "Upgrades"). @default none
   */
  readonly route?: string | undefined;
  /**
   * The request headers, names lower-case; a repeated header joined with `, ` as RFC 9110 allows
   * (Node's `IncomingMessage.headers` and `Object.fromEntries(request.headers)` both fit).
   */
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The raw body bytes (empty for none). */
  readonly body: Uint8Array;
}

/** What a handler answered, and what a replay sends back: status, headers and the body's bytes. */
export interface HttpResponseData {
  /** The HTTP status. */
  readonly status: number;
  /** The header pairs, in order. */
  readonly headers: HeaderPairs;
  /** The body's bytes. */
  readonly body: Uint8Array;
  /**
   * Set on the answers `@once/http` writes itself (400, 409, 422, 500, 503): what the answer
   * says, from which `formatProblem` writes its body. Never stored with a key.
   */
  readonly problem?: ProblemDetails | undefined;
}

/**
 * What the handler of an idempotent route receives: the transaction that holds the key's claim,
 * and the outbox and steps of core's handlers ({@link @once/core#HandlerContext}).
 */
export interface IdempotentContext {
  /**
   * The request's transaction: the key's claim, these writes, the outbox rows and the stored
   * response commit together, and the response is sent after COMMIT. In lease mode it opens on
   * first use.
   */
  readonly tx: Tx;
  /** Writes a message into the outbox in this transaction (needs the `outbox` option). Returns its id. */
  publish(destination: string, body: Buffer | string | object, options?: PublishOptions): Promise<string>;
  /** Lease mode: runs an effect outside PostgreSQL once, recorded as a durable step (core's `ctx.step`). */
  step<T>(name: string, fn: StepFn<T>): Promise<T>;
  /**
   * A stable key (a UUID) for step `name` of this request's key and scope: pass it to the outside
   * service's own idempotency key. The same on every retry with this key.
   */
  idempotencyKey(step: string): string;
  /** The client's key, normalised (the structured-field string's content, or the bare token). */
  readonly key: string;
  /** The scope the key lives in (what the scope function returned). */
  readonly scope: string;
  /** 1 on the first run of this key; in lease mode, the count of claims (a takeover after a crash is 2). */
  readonly attempt: number;
  /** Aborted when the handler's deadline passes (or, in lease mode, its lease is lost). Not by a client disconnect. */
  readonly signal: AbortSignal;
}

/**
 * Runs the route's handler and captures what it answered. A binding passes one to
 * {@link Idempotency.handle}; the engine calls it at most once, inside the key's transaction, and
 * only when the key is new (or, in lease mode, taken over after its lease expired). Resolve with
 * the complete response (never stream it to the client from here: it must wait for COMMIT);
 * reject when the handler threw.
 */
export type RunHandler = (ctx: IdempotentContext) => Promise<HttpResponseData>;

/**
 * How a request ended, for the binding's logs and tests; the binding sends `response` either way.
 * - `processed`: the handler ran and its response committed with the key (2xx/3xx, or a stored 4xx);
 * - `replayed`: the key was complete; `response` is the stored one, marked as a replay;
 * - `not-stored`: the handler answered 5xx, 304, 408, 409, 425 or 429: sent as it is, nothing kept,
 *   its writes rolled back, so a retry runs again;
 * - `failed`: the handler threw, or COMMIT failed (a deferred constraint): a 500 problem, nothing kept;
 *   also a request the engine's `route` could not place in a database (500 `unroutable`, its
 *   `error` an `UnroutableError`), and a database that cannot be used (503 `unavailable`);
 * - `in-flight`: another request holds the key: 409 with `Retry-After`;
 * - `mismatch`: the key was used with another request fingerprint: 422;
 * - `invalid-key` / `missing-key`: 400;
 * - `unkeyed`: no key, and the route does not require one: the handler ran in a plain transaction.
 */
export type HandleStatus =
  | 'processed'
  | 'replayed'
  | 'not-stored'
  | 'failed'
  | 'in-flight'
  | 'mismatch'
  | 'invalid-key'
  | 'missing-key'
  | 'unkeyed';

/** What {@link Idempotency.handle} returns: the response to send now (after COMMIT), and why. */
export interface HandleResult {
  /** Why this response: the handler ran, a replay, a refusal (see {@link HandleStatus}). */
  readonly status: HandleStatus;
  /** Send exactly this: status, headers (a fresh `Date` is the binding's or server's to add) and body. */
  readonly response: HttpResponseData;
  /** The normalised key, when the request carried a valid one. */
  readonly key?: string | undefined;
  /** The error behind `failed`, for the binding's logger. */
  readonly error?: unknown;
}

/** Per-route settings a binding passes through to {@link Idempotency.handle}. */
export interface RouteOptions {
  /** Refuse a request without `Idempotency-Key` with 400. @default true */
  readonly required?: boolean | undefined;
  /**
   * Request headers that join the fingerprint (lower-case names), e.g. `['content-type']`: the same
   * key with another value of one of them is a 422. @default the engine's `fingerprintHeaders`
   */
  readonly fingerprintHeaders?: readonly string[] | undefined;
}
