import { optionCheck } from '@once/core/adapter';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { reportResult } from './binding-log.js';
import type { Idempotency } from './engine.js';
import { readRawBody } from './express-body.js';
import { ResponseCapture } from './express-capture.js';
import { BindingErrorCode, bindingError } from './fastify-express-errors.js';
import { type BindingOptions, checkBindingOptions } from './fastify-express-options.js';
import { setHeaderPairs } from './fastify-response.js';
import { endableContext } from './route-end.js';
import type { HandleResult, HttpResponseData, IdempotentContext, RouteOptions } from './types.js';

export { keepRawBody } from './express-body.js';
export { BindingErrorCode } from './fastify-express-errors.js';
export type { BindingOptions } from './fastify-express-options.js';
export type { HttpProblem, ProblemDetails } from './problem-details.js';
export type {
  HandleResult,
  HandleStatus,
  HeaderPairs,
  HttpResponseData,
  IdempotentContext,
  RouteOptions,
} from './types.js';

/** Options of {@link expressIdempotency}: the engine, the required `scope`, `onResult`, and the body limit. */
export interface ExpressIdempotencyOptions extends BindingOptions<Request> {
  /**
   * The largest body the middleware reads itself, in bytes, when no body parser with
   * {@link keepRawBody} read it first; a larger one is refused with 413.
   * @default 1048576 (1 MiB, `express.json()`'s own default limit is 100 kB)
   */
  bodyLimitBytes?: number | undefined;
}

/** The defaults of {@link ExpressIdempotencyOptions}. */
export const DEFAULT_EXPRESS_IDEMPOTENCY_OPTIONS = Object.freeze({ bodyLimitBytes: 1024 * 1024 });

declare global {
  namespace Express {
    interface Request {
      /**
       * The idempotent route's context (`@once/http/express`): `tx`, `publish`, `step`,
       * `idempotencyKey`. Set by the middleware for the handlers after it; `undefined` elsewhere.
       */
      readonly idempotent: IdempotentContext;
    }
  }
}

/** Returns the middleware for one idempotent route, with optional per-route settings. */
export type ExpressIdempotentMiddleware = (routeOptions?: RouteOptions) => RequestHandler;

/**
 * Express 5 middleware for idempotent routes:
 * ```ts
 * const idempotent = expressIdempotency({ idempotency, scope: (req) => req.user.id });
 * app.post('/charges', express.json({ verify: keepRawBody }), idempotent(), async (req, res) => {
 *   await req.idempotent.tx.query('insert into charges ...');
 *   res.status(201).json(charge);
 * });
 * ```
 * The key is claimed when the middleware runs; the handlers after it run in the key's
 * transaction, and their response is held back (`res.end` captured) until COMMIT. A streamed
 * response (`res.write`, a pipe, `res.sendFile`, `res.flushHeaders`) is refused: a 500 and
 * nothing stored. The body bytes are fingerprinted: keep them with `keepRawBody` in the body
 * parser's `verify`, or let the middleware read an unread body itself (then `req.body` is a
 * Buffer, as with `express.raw()`).
 */
export function expressIdempotency(options: ExpressIdempotencyOptions): ExpressIdempotentMiddleware {
  checkBindingOptions(options);
  const { idempotency, scope } = options;
  const limit = options.bodyLimitBytes ?? DEFAULT_EXPRESS_IDEMPOTENCY_OPTIONS.bodyLimitBytes;
  if (!Number.isSafeInteger(limit) || limit < 0) {
    throw optionCheck.invalid('bodyLimitBytes', 'must be a non-negative integer');
  }
  return (routeOptions) => {
    return function onceIdempotent(req: Request, res: Response, next: NextFunction): void {
      run(idempotency, scope, limit, routeOptions, options.onResult, req, res, next).catch(next);
    };
  };
}

async function run(
  idempotency: Idempotency,
  scopeOf: ExpressIdempotencyOptions['scope'],
  limitBytes: number,
  routeOptions: RouteOptions | undefined,
  onResult: ExpressIdempotencyOptions['onResult'],
  req: Request,
  res: Response,
  next: NextFunction,
): Promise<void> {
  const raw = await readRawBody(req, limitBytes);
  if (raw.kind === 'consumed') {
    throw bindingError(
      BindingErrorCode.RawBodyMissing,
      `the body of ${req.method} ${req.originalUrl} was parsed before the idempotency middleware without keeping its bytes: pass \`verify: keepRawBody\` to the body parser`,
    );
  }
  if (raw.kind === 'too-large') {
    throw Object.assign(
      bindingError(
        BindingErrorCode.BodyTooLarge,
        `the request body is larger than bodyLimitBytes (${raw.limitBytes})`,
      ),
      { status: 413, statusCode: 413, expose: true },
    );
  }
  const scope = await scopeOf(req);
  let capture: ResponseCapture | undefined;
  let result: HandleResult;
  async function runRoute(ctx: IdempotentContext): Promise<HttpResponseData> {
    // The response is the end of the route's writes: ended the moment res.end (or a streaming
    // call) is made, before the key's COMMIT is even sent.
    const route = endableContext(ctx, `res.end on ${req.method} ${req.originalUrl}`);
    Object.defineProperty(req, 'idempotent', { value: route.ctx, configurable: true, enumerable: false });
    const c = new ResponseCapture(res, route.end);
    capture = c;
    // The rest of the route runs in the key's transaction; only its response is awaited.
    next();
    const outcome = await c.outcome;
    if (outcome.kind === 'streaming') {
      throw bindingError(
        BindingErrorCode.StreamingRefused,
        `${outcome.via} on the idempotent route ${req.method} ${routeOf(req)} is refused: its response must be complete before COMMIT (use res.send / res.json / res.end)`,
      );
    }
    return outcome.response;
  }
  try {
    result = await idempotency.handle(
      {
        method: req.method,
        target: req.originalUrl,
        route: routeOf(req),
        headers: req.headers as Record<string, string | undefined>,
        body: raw.bytes,
      },
      scope,
      (ctx) => {
        const running = runRoute(ctx);
        // The engine awaits it; should it stop waiting (its handler deadline), a late refusal must
        // not become an unhandled rejection.
        running.catch(() => {});
        return running;
      },
      routeOptions,
    );
  } catch (err) {
    // The engine itself failed (the handler's own failures come back as a result). Before the
    // route ran, Express's error handling answers; after it ran (next() was called), the
    // held-back response gets a bare 500 here: Express must not route this request twice.
    if (capture === undefined) throw err;
    capture.send({
      status: 500,
      headers: [['content-type', 'text/plain; charset=utf-8']],
      body: Buffer.from('Internal Server Error'),
    });
    return;
  }
  reportResult(idempotency, onResult, result, req);
  if (capture) capture.send(result.response);
  else sendDirect(res, result);
}

/**
 * The route's pattern with its router's mount path (`/accounts/:id/charges`): a name the identity
 * adds beside the target, and what fingerprint version 1 took instead of it.
 */
function routeOf(req: Request): string {
  const path = req.route?.path;
  return `${req.baseUrl}${typeof path === 'string' ? path : req.path}`;
}

/**
 * Sends an answer of the engine's when the route did not run (a replay, 400, 409, 422, 503): its
 * headers over those earlier middleware set for this request (CORS, request ids), which stay.
 */
function sendDirect(res: Response, result: HandleResult): void {
  const r = result.response;
  if (res.headersSent || res.destroyed) return;
  res.status(r.status);
  setHeaderPairs(res.setHeader.bind(res), r.headers);
  res.end(Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength));
}
