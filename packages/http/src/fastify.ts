import type {
  FastifyInstance,
  FastifyPluginCallback,
  FastifyRequest,
  RouteOptions as FastifyRouteOptions,
} from 'fastify';
import { BindingErrorCode, bindingError } from './fastify-express-errors.js';
import { type BindingOptions, checkBindingOptions } from './fastify-express-options.js';
import {
  type Internal,
  kState,
  makeOnSend,
  makePreHandler,
  onError,
  preParsing,
  wrapHandler,
} from './fastify-hooks.js';
import type { IdempotentContext, RouteOptions } from './types.js';

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
        const route = `${this.method} ${this.routeOptions.url}`;
        const marked = (this.routeOptions.config as { idempotent?: unknown } | undefined)?.idempotent;
        // Marked, yet not idempotent: the route was declared before the plugin's onRoute hook
        // existed, so the hook never saw it.
        throw bindingError(
          BindingErrorCode.NotIdempotent,
          marked !== undefined && marked !== false
            ? `request.idempotent is not set on ${route}, though its config marks it idempotent: the route was declared before @once/http/fastify was registered: register the plugin before the routes (\`await app.register(fastifyIdempotency, …)\` before declaring them)`
            : `request.idempotent is only set on idempotent routes: add \`config: { idempotent: true }\` to ${route}`,
        );
      }
      return ctx;
    },
  });

  // The answer is taken in an onSend hook of the instance, added here: it runs before the onSend
  // hooks of plugins registered after this one and before every route-level one (those
  // @fastify/compress adds), so what is stored is the route's own answer, and compression, ETags
  // and the like apply afresh to every response, replays included.
  fastify.addHook('onSend', makeOnSend(idempotency, options.onResult));

  fastify.addHook('onRoute', (route: FastifyRouteOptions) => {
    const config = route.config?.idempotent;
    if (config === undefined || config === false) return;
    const routeOptions: RouteOptions | undefined = config === true ? undefined : config;
    // Route-level hooks run after the instance's hooks of the same kind, so the key is claimed
    // after authentication (which the scope needs).
    route.preParsing = [...asArray(route.preParsing), preParsing];
    route.preHandler = [
      ...asArray(route.preHandler),
      makePreHandler(idempotency, scope, routeOptions, options.onResult),
    ];
    route.onError = [...asArray(route.onError), onError];
    route.handler = wrapHandler(route.handler);
  });
  done();
}

function asArray<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}

/**
 * The Fastify 5 plugin: `await app.register(fastifyIdempotency, { idempotency, scope })`, then
 * mark a route with `config: { idempotent: true }` and use `request.idempotent.tx` in its handler.
 * Registered without encapsulation, so it applies to the routes declared after it in the
 * registering scope and its children; register it before plugins that change responses in
 * `onSend` (@fastify/etag, your own hooks). Each idempotent route's body bytes are copied as they
 * are parsed (for the fingerprint), the key is claimed in a `preHandler` after the route's own,
 * and the key's transaction commits once the handler has ended and its answer reached `onSend`.
 */
export const fastifyIdempotency: FastifyPluginCallback<FastifyIdempotencyOptions> = Object.assign(plugin, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: '@once/http/fastify',
  [Symbol.for('plugin-meta')]: { name: '@once/http/fastify', fastify: '5.x' },
});
