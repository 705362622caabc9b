/**
 * `@once/http/fetch`: an idempotent route as a Fetch API handler, `(Request) => Promise<Response>`,
 * for Hono, Next.js route handlers, Bun-style servers on Node, and `node:http` through
 * `@once/http/node`.
 *
 * ```ts
 * const createCharge = idempotentFetch(idempotency, {
 *   scope: (req) => accountOf(req),
 *   handler: async (req, ctx) => {
 *     await ctx.tx.query('INSERT INTO charges ...', [...]);
 *     return Response.json({ ok: true }, { status: 201 });
 *   },
 * });
 * ```
 */
import { bindingWarn, reportResult } from './binding-log.js';
import type { Idempotency } from './engine.js';
import { formatProblem, HttpProblem, problemResponse } from './problem.js';
import { endableContext } from './route-end.js';
import type { HandleResult, HttpResponseData, IdempotentContext, RouteOptions } from './types.js';

export type { HttpProblem, ProblemDetails } from './problem-details.js';
export type {
  HandleResult,
  HandleStatus,
  HeaderPairs,
  HttpResponseData,
  IdempotentContext,
  RouteOptions,
} from './types.js';

/** Options of {@link idempotentFetch}. */
export interface IdempotentFetchOptions extends RouteOptions {
  /**
   * The scope a key lives in, from the request: it must include the principal (the account or
   * user the request acts for), so two clients that pick the same key never see each other's
   * response. Read it from what your authentication established, never from a header the client
   * chooses freely. Required.
   */
  scope: (request: Request) => string | Promise<string>;
  /**
   * The route's handler: its writes go through `ctx.tx`, its messages through `ctx.publish`. The
   * Response it returns is the end of its writes: `ctx.tx`, `ctx.publish` and `ctx.step` used after
   * it returned (a query not awaited, a timer) reject with `TX_REVOKED` and reach nothing.
   */
  handler: (request: Request, ctx: IdempotentContext) => Response | Promise<Response>;
  /**
   * A name for the route, added to the request's identity beside its target (path and query),
   * never instead of it. @default none: the target alone
   */
  route?: string | undefined;
  /** Called with every request's result (for logs and tests); a throw is logged and ignored. @default none */
  onResult?: ((result: HandleResult, request: Request) => void) | undefined;
}

// Statuses whose responses have no body (the Response constructor refuses one).
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** An idempotent route as a Fetch handler. The response is built only after the key's COMMIT. */
export function idempotentFetch(
  idempotency: Idempotency,
  options: IdempotentFetchOptions,
): (request: Request) => Promise<Response> {
  if (typeof options?.scope !== 'function') {
    throw new TypeError(
      'idempotentFetch: options.scope must be a function (the principal the key belongs to)',
    );
  }
  if (typeof options.handler !== 'function')
    throw new TypeError('idempotentFetch: options.handler must be a function');
  const route: RouteOptions = { required: options.required, fingerprintHeaders: options.fingerprintHeaders };
  return async (request) => {
    let result: HandleResult;
    let scope: string;
    try {
      scope = await options.scope(request);
    } catch (err) {
      const failed = problemResponse(
        500,
        HttpProblem.HandlerFailed,
        'the scope of the request could not be determined',
      );
      result = {
        status: 'failed',
        error: err,
        response: formatProblem(failed, idempotency.options.formatProblem, (e) =>
          bindingWarn(idempotency, { err: e }, '@once/http: formatProblem threw; answered problem+json'),
        ),
      };
      reportResult(idempotency, options.onResult, result, request);
      return toResponse(result.response);
    }
    // The handler still gets the original request (with its body): the engine hashes a copy.
    const body = new Uint8Array(await request.clone().arrayBuffer());
    result = await idempotency.handle(
      {
        method: request.method,
        target: targetOf(request.url),
        route: options.route,
        headers: Object.fromEntries(request.headers),
        body,
      },
      scope,
      async (ctx) => {
        const route = endableContext(ctx, 'the Fetch handler returned');
        let response: Response;
        try {
          response = await options.handler(request, route.ctx);
        } finally {
          route.end();
        }
        return fromResponse(response);
      },
      route,
    );
    reportResult(idempotency, options.onResult, result, request);
    return toResponse(result.response);
  };
}

/**
 * The request target (path and query, as the URL holds them) of an absolute URL: what follows
 * the authority, without the fragment. `?` stays even when the query is empty.
 */
function targetOf(url: string): string {
  const authority = url.indexOf('//');
  const start = authority < 0 ? 0 : url.indexOf('/', authority + 2);
  if (start < 0) {
    const q = url.indexOf('?', authority + 2);
    return q < 0 ? '/' : `/${cutHash(url.slice(q))}`;
  }
  return cutHash(url.slice(start));
}

function cutHash(s: string): string {
  const hash = s.indexOf('#');
  return hash < 0 ? s : s.slice(0, hash);
}

/** Buffers a handler's Response (streaming is not possible: the bytes are stored before they are sent). */
export async function fromResponse(response: Response): Promise<HttpResponseData> {
  if (!(response instanceof Response)) throw new TypeError('the handler must return a Response');
  return {
    status: response.status,
    headers: [...response.headers],
    body: new Uint8Array(await response.arrayBuffer()),
  };
}

/** The Response a binding sends for `data`. */
export function toResponse(data: HttpResponseData): Response {
  const headers = new Headers();
  for (const [name, value] of data.headers) headers.append(name, value);
  const body = NULL_BODY.has(data.status) || data.body.byteLength === 0 ? null : data.body;
  return new Response(body as ConstructorParameters<typeof Response>[0], { status: data.status, headers });
}
