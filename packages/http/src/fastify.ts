import type {
  FastifyInstance,
  FastifyPluginCallback,
  FastifyReply,
  FastifyRequest,
  RouteOptions as FastifyRouteOptions,
  RequestPayload,
} from 'fastify';
import type { Idempotency } from './engine.js';
import { type FastifyBodyTap, tapBody } from './fastify-body.js';
import { BindingErrorCode, bindingError } from './fastify-express-errors.js';
import { type BindingOptions, checkBindingOptions } from './fastify-express-options.js';
import { bodyBuffer, groupHeaders, headerPairs, payloadBytes } from './fastify-response.js';
import type { HandleResult, HttpResponseData, IdempotentContext, RouteOptions } from './types.js';

export { BindingErrorCode } from './fastify-express-errors.js';
export type { BindingOptions } from './fastify-express-options.js';
export type {
  HandleResult,
  HandleStatus,
  HeaderPairs,
  HttpResponseData,
  IdempotentContext,
  RouteOptions,
} from './types.js';

/** Options of {@link fastifyIdempotency}: the engine, the required `scope`, and `onResult`. */
export interface FastifyIdempotencyOptions extends BindingOptions<FastifyRequest> {}

/**
 * The per-route setting, under the route's `config`: `{ config: { idempotent: true } }`, or an
 * object of per-route options.
 */
export type FastifyIdempotentConfig = boolean | RouteOptions;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Marks the route idempotent (`@once/http/fastify`): `true`, or per-route options. */
    idempotent?: FastifyIdempotentConfig;
  }
  interface FastifyRequest {
    /**
     * The idempotent route's context (`@once/http/fastify`): `tx`, `publish`, `step`,
     * `idempotencyKey`. Reading it on a route not marked idempotent throws.
     */
    readonly idempotent: IdempotentContext;
  }
}

// Per-request state, kept under symbols so nothing collides with the application's decorations.
const kTap = Symbol('@once/http.fastify.tap');
const kState = Symbol('@once/http.fastify.state');

interface RequestState {
  ctx: IdempotentContext | undefined;
  /** Set once the handler's response was handed to the engine (or the request ended without running). */
  settled: boolean;
  /** What the handler (or a hook after the claim) threw, seen by onError. */
  threw: unknown;
  capture: (response: HttpResponseData) => void;
  refuse: (err: Error) => void;
  result: Promise<HandleResult>;
}

type Internal = FastifyRequest & { [kTap]?: FastifyBodyTap; [kState]?: RequestState };

function plugin(
  fastify: FastifyInstance,
  options: FastifyIdempotencyOptions,
  done: (err?: Error) => void,
): void {
  try {
    checkBindingOptions(options);
  } catch (err) {
    done(err as Error);
    return;
  }
  const { idempotency, scope } = options;

  fastify.decorateRequest('idempotent', {
    getter(this: FastifyRequest): IdempotentContext {
      const ctx = (this as Internal)[kState]?.ctx;
      if (ctx === undefined) {
        throw bindingError(
          BindingErrorCode.NotIdempotent,
          `request.idempotent is only set on idempotent routes: add \`config: { idempotent: true }\` to ${this.method} ${this.routeOptions.url}`,
        );
      }
      return ctx;
    },
  });

  fastify.addHook('onRoute', (route: FastifyRouteOptions) => {
    const config = route.config?.idempotent;
    if (config === undefined || config === false) return;
    const routeOptions: RouteOptions | undefined = config === true ? undefined : config;
    // Route-level hooks run after the instance's hooks of the same kind, so the key is claimed after
    // authentication (which the scope needs) and the response is captured after every other onSend
    // hook changed it: the bytes stored are the bytes sent.
    route.preParsing = [...asArray(route.preParsing), preParsing];
    route.preHandler = [
      ...asArray(route.preHandler),
      makePreHandler(idempotency, scope, routeOptions, options.onResult),
    ];
    route.onError = [...asArray(route.onError), onError];
    route.onSend = [...asArray(route.onSend), makeOnSend(options.onResult)];
  });
  done();
}

function asArray<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}

// Not async: Fastify's hook runner takes the returned stream as the new payload.
function preParsing(
  request: FastifyRequest,
  _reply: FastifyReply,
  payload: RequestPayload,
  done: (err?: Error | null, res?: RequestPayload) => void,
): void {
  const tap = tapBody(payload);
  (request as Internal)[kTap] = tap;
  done(null, tap);
}

function makePreHandler(
  idempotency: Idempotency,
  scopeOf: FastifyIdempotencyOptions['scope'],
  routeOptions: RouteOptions | undefined,
  onResult: FastifyIdempotencyOptions['onResult'],
) {
  return async function oncePreHandler(
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<FastifyReply | undefined> {
    const internal = request as Internal;
    const scope = await scopeOf(request);
    let ready!: () => void;
    const ran = new Promise<void>((resolve) => {
      ready = resolve;
    });
    let capture!: (response: HttpResponseData) => void;
    let refuse!: (err: Error) => void;
    const captured = new Promise<HttpResponseData>((resolve, reject) => {
      capture = resolve;
      refuse = reject;
    });
    // The engine awaits it; should it stop waiting (its handler deadline), a late refusal must not
    // become an unhandled rejection.
    captured.catch(() => {});
    const state: RequestState = {
      ctx: undefined,
      settled: false,
      threw: undefined,
      capture,
      refuse,
      result: Promise.resolve(undefined as unknown as HandleResult),
    };
    state.result = idempotency.handle(
      {
        method: request.method,
        route: request.routeOptions.url ?? request.url.split('?')[0] ?? '/',
        headers: request.headers as Record<string, string | undefined>,
        body: internal[kTap]?.bytes() ?? new Uint8Array(0),
      },
      scope,
      (ctx) => {
        state.ctx = ctx;
        ready();
        return captured;
      },
      routeOptions,
    );
    internal[kState] = state;
    const first = await Promise.race([ran.then(() => undefined), state.result]);
    if (first !== undefined) {
      // The key was not run here (a replay, 409, 422, 400): answer with what the engine says. The
      // onSend hook sees `settled` and lets it through untouched.
      state.settled = true;
      onResult?.(first, request);
      applyResponse(reply, first.response);
      // Returning the reply (a thenable) holds the route until it is sent: the handler never runs.
      return reply.send(bodyBuffer(first.response));
    }
    // The handler runs in the key's transaction; its response must wait for COMMIT in onSend.
    reply.hijack = () => {
      throw bindingError(
        BindingErrorCode.StreamingRefused,
        `reply.hijack() is refused on the idempotent route ${request.method} ${request.routeOptions.url}: its response must wait for COMMIT`,
      );
    };
    return undefined;
  };
}

// onError sees a throw before the error handler turns it into a response: a thrown error stores
// nothing (the retry runs again), whatever status the error handler gives it.
async function onError(request: FastifyRequest, _reply: FastifyReply, error: Error): Promise<void> {
  const state = (request as Internal)[kState];
  if (state !== undefined && !state.settled) state.threw = error;
}

// onSend runs once the handler's payload is serialised and before any byte is written: the
// handler's response is handed to the engine here, and the hook waits for COMMIT before the
// reply goes on. A COMMIT that fails (a deferred constraint) turns into the engine's 500 here.
function makeOnSend(onResult: FastifyIdempotencyOptions['onResult']) {
  return async function onceOnSend(
    request: FastifyRequest,
    reply: FastifyReply,
    payload: unknown,
  ): Promise<unknown> {
    const state = (request as Internal)[kState];
    if (state === undefined || state.settled || state.ctx === undefined) return payload;
    state.settled = true;
    const body = payloadBytes(payload);
    if (state.threw !== undefined) {
      // Rolled back and not stored; the client gets the error handler's answer.
      state.refuse(state.threw instanceof Error ? state.threw : new Error(String(state.threw)));
      onResult?.(await state.result, request);
      return payload;
    }
    if (body === undefined) {
      // A stream (or web stream, or Response) would reach the client before COMMIT.
      (payload as { destroy?: () => void } | null)?.destroy?.();
      state.refuse(
        bindingError(
          BindingErrorCode.StreamingRefused,
          `a streamed reply is refused on the idempotent route ${request.method} ${request.routeOptions.url}: send a string, Buffer or object so it can be stored and sent after COMMIT`,
        ),
      );
    } else {
      state.capture({ status: reply.statusCode, headers: headerPairs(reply.getHeaders()), body });
    }
    const result = await state.result;
    onResult?.(result, request);
    applyResponse(reply, result.response);
    return bodyBuffer(result.response);
  };
}

/** Replaces the reply's status and headers with the response's (Node adds a fresh `Date`). */
function applyResponse(reply: FastifyReply, response: HttpResponseData): void {
  for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
  reply.code(response.status);
  for (const [name, values] of groupHeaders(response.headers)) {
    reply.header(name, values.length === 1 ? values[0] : values);
  }
}

/**
 * The Fastify 5 plugin: `await app.register(fastifyIdempotency, { idempotency, scope })`, then
 * mark a route with `config: { idempotent: true }` and use `request.idempotent.tx` in its handler.
 * Registered without encapsulation, so it applies to the routes declared after it in the
 * registering scope and its children. Each idempotent route's body bytes are copied as they are
 * parsed (for the fingerprint), the key is claimed in a `preHandler` after the route's own, and
 * the response is committed in `onSend`.
 */
export const fastifyIdempotency: FastifyPluginCallback<FastifyIdempotencyOptions> = Object.assign(plugin, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: '@once/http/fastify',
  [Symbol.for('plugin-meta')]: { name: '@once/http/fastify', fastify: '5.x' },
});
