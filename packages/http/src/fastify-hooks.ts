import type { FastifyReply, FastifyRequest, RequestPayload, RouteHandlerMethod } from 'fastify';
import { reportResult } from './binding-log.js';
import type { Idempotency } from './engine.js';
import { type FastifyBodyTap, tapBody } from './fastify-body.js';
import { BindingErrorCode, bindingError } from './fastify-express-errors.js';
import type { BindingOptions } from './fastify-express-options.js';
import { bodyBuffer, headerPairs, headersSince, payloadBytes, setHeaderPairs } from './fastify-response.js';
import { endableContext } from './route-end.js';
import type {
  HandleResult,
  HeaderPairs,
  HttpResponseData,
  IdempotentContext,
  RouteOptions,
} from './types.js';

// The hooks of @once/http/fastify (fastify.ts wires them). Per-request state is kept under symbols
// so that nothing collides with the application's decorations.

const kTap = Symbol('@once/http.fastify.tap');
/** Where a request's {@link RequestState} lives. */
export const kState = Symbol('@once/http.fastify.state');

type OnResult = BindingOptions<FastifyRequest>['onResult'];

interface RequestState {
  /** The route's context; undefined until the handler may run (and for a key not run here). */
  ctx: IdempotentContext | undefined;
  /** The headers the reply held when the key was claimed: this request's, not the answer's. */
  readonly early: HeaderPairs;
  /** The handler has ended (its promise settled, or it handed the reply back). */
  ended: boolean;
  readonly handlerDone: Promise<void>;
  /** Ends the route: its writes are refused from here on, and the answer may commit. */
  finish: () => void;
  /** Set once an answer reached onSend (or the request ended without running). */
  settled: boolean;
  /** An answer is held in onSend until COMMIT. */
  holding: boolean;
  /** What the handler (or a hook after the claim) threw. */
  threw: unknown;
  capture: (response: HttpResponseData) => void;
  refuse: (err: Error) => void;
  result: Promise<HandleResult>;
}

/** A Fastify request with the plugin's state. */
export type Internal = FastifyRequest & { [kTap]?: FastifyBodyTap; [kState]?: RequestState };

// Not async: Fastify's hook runner takes the returned stream as the new payload.
export function preParsing(
  request: FastifyRequest,
  _reply: FastifyReply,
  payload: RequestPayload,
  done: (err?: Error | null, res?: RequestPayload) => void,
): void {
  const tap = tapBody(payload);
  (request as Internal)[kTap] = tap;
  done(null, tap);
}

export function makePreHandler(
  idempotency: Idempotency,
  scopeOf: BindingOptions<FastifyRequest>['scope'],
  routeOptions: RouteOptions | undefined,
  onResult: OnResult,
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
    let done!: () => void;
    const handlerDone = new Promise<void>((resolve) => {
      done = resolve;
    });
    let endRoute = () => {};
    const state: RequestState = {
      ctx: undefined,
      early: headerPairs(reply.getHeaders()),
      ended: false,
      handlerDone,
      finish: () => {
        if (state.ended) return;
        state.ended = true;
        endRoute();
        done();
      },
      settled: false,
      holding: false,
      threw: undefined,
      capture,
      refuse,
      result: Promise.resolve(undefined as unknown as HandleResult),
    };
    const where = `the handler of ${request.method} ${request.routeOptions.url} ended`;
    state.result = idempotency.handle(
      {
        method: request.method,
        target: request.originalUrl,
        route: request.routeOptions.url,
        headers: request.headers as Record<string, string | undefined>,
        body: internal[kTap]?.bytes() ?? new Uint8Array(0),
      },
      scope,
      (ctx) => {
        const route = endableContext(ctx, where);
        endRoute = route.end;
        state.ctx = route.ctx;
        ready();
        return captured;
      },
      routeOptions,
    );
    internal[kState] = state;
    const first = await Promise.race([ran.then(() => undefined), state.result]);
    if (first !== undefined) {
      // The key was not run here (a replay, 409, 422, 400): answer with what the engine says, over
      // this request's own headers (CORS and the like, set by earlier hooks). The handler never runs.
      state.settled = true;
      reportResult(idempotency, onResult, first, request);
      reply.code(first.response.status);
      setHeaderPairs(headerOf(reply), first.response.headers);
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

/**
 * The route's handler, wrapped so the plugin knows when it ends: when its promise settles, or
 * when it hands the reply back (`return reply`, `await reply`), which waits for the response and
 * so for the COMMIT that waits for the handler. Writes after that end are refused.
 */
export function wrapHandler(original: RouteHandlerMethod): RouteHandlerMethod {
  return function onceHandler(this: unknown, request, reply) {
    const state = (request as Internal)[kState];
    if (state?.ctx === undefined) return original.call(this as never, request, reply);
    const then = reply.then;
    // biome-ignore lint/suspicious/noThenProperty: the reply is a thenable; awaiting it ends the route
    (reply as { then: FastifyReply['then'] }).then = function (this: FastifyReply, ...args) {
      state.finish();
      return then.apply(this, args);
    };
    let out: unknown;
    try {
      out = original.call(this as never, request, reply);
    } catch (err) {
      state.threw ??= err;
      state.finish();
      throw err;
    }
    if (out !== reply && typeof (out as PromiseLike<unknown> | null)?.then === 'function') {
      // Attached before Fastify's own handlers of this promise: the throw is known before the
      // error handler's answer reaches onSend.
      (out as PromiseLike<unknown>).then(state.finish, (err: unknown) => {
        state.threw ??= err;
        state.finish();
      });
    } else {
      state.finish();
    }
    return out;
  } as RouteHandlerMethod;
}

// onError sees a throw before the error handler turns it into a response: a thrown error stores
// nothing (the retry runs again), whatever status the error handler gives it.
export async function onError(request: FastifyRequest, _reply: FastifyReply, error: Error): Promise<void> {
  const state = (request as Internal)[kState];
  if (state !== undefined && !state.settled) state.threw ??= error;
}

// Never settles: what an onSend hook returns to stop Fastify from sending a payload that another
// send of the same reply has superseded (nothing refers to it once the response is out).
const superseded = () => new Promise<never>(() => {});

/**
 * The instance-level onSend hook: for a request whose key was claimed here, waits for the handler
 * to end, hands the answer (status, the headers the route set, the serialised payload) to the
 * engine, waits for COMMIT, and sends the engine's answer: the route's, or a 500 when COMMIT
 * failed (a deferred constraint), never the route's 2xx then.
 */
export function makeOnSend(idempotency: Idempotency, onResult: OnResult) {
  return async function onceOnSend(
    request: FastifyRequest,
    reply: FastifyReply,
    payload: unknown,
  ): Promise<unknown> {
    const state = (request as Internal)[kState];
    if (state === undefined || state.ctx === undefined) return payload;
    if (state.settled) {
      // A second send while the first waits for COMMIT: Fastify sends again when a handler that
      // called reply.send() resolves with nothing (without `return reply`). The first carries
      // the answer. After a throw, the second is the error handler's, and goes through.
      if (state.holding && state.threw === undefined) return superseded();
      return payload;
    }
    state.settled = true;
    state.holding = true;
    const sentBeforeItEnded = !state.ended;
    await Promise.race([state.handlerDone, state.result]);
    if (state.threw !== undefined) {
      // Rolled back and not stored; the client gets the error handler's answer.
      state.refuse(state.threw instanceof Error ? state.threw : new Error(String(state.threw)));
      reportResult(idempotency, onResult, await state.result, request);
      // The handler sent this before it threw: the error handler's answer replaces it.
      if (sentBeforeItEnded) return superseded();
      return payload;
    }
    const body = payloadBytes(payload);
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
      state.capture({
        status: reply.statusCode,
        headers: headersSince(reply.getHeaders(), state.early),
        body,
      });
    }
    const result = await state.result;
    reportResult(idempotency, onResult, result, request);
    // The engine's answer over this request's own headers, as the route's first answer had it.
    for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
    reply.code(result.response.status);
    setHeaderPairs(headerOf(reply), state.early);
    setHeaderPairs(headerOf(reply), result.response.headers);
    return bodyBuffer(result.response);
  };
}

/** A reply's header setter, for {@link setHeaderPairs}. */
function headerOf(reply: FastifyReply): (name: string, value: string | string[]) => unknown {
  return (name, value) => reply.header(name, value);
}
