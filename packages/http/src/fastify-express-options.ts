import { optionCheck } from '@once/core/adapter';
import type { Idempotency } from './engine.js';
import type { HandleResult } from './types.js';

/** What the Fastify plugin and the Express middleware both take; `Req` is the framework's request. */
export interface BindingOptions<Req> {
  /** The engine (`createIdempotency({ pool, ... })`) the routes' keys go through. */
  idempotency: Idempotency;
  /**
   * Required: the scope a key lives in, from the request. It must include the principal (the
   * authenticated user, account or API client), or two clients choosing the same key would read
   * each other's responses. Runs after authentication: Fastify runs it in a `preHandler` after the
   * route's other hooks; Express when the middleware runs, so put authentication before it.
   */
  scope: (request: Req) => string | Promise<string>;
  /** Called with every idempotent request's result (for logs and tests). @default none */
  onResult?: ((result: HandleResult, request: Req) => void) | undefined;
}

/** Throws {@link invalidOption} naming the field unless `options` has an engine and a scope function. */
export function checkBindingOptions<Req>(options: BindingOptions<Req>): void {
  if (typeof options !== 'object' || options === null) throw optionCheck.invalid('', 'must be an object');
  if (typeof options.idempotency?.handle !== 'function') {
    throw optionCheck.invalid('idempotency', 'must be the engine from createIdempotency()');
  }
  if (typeof options.scope !== 'function') {
    throw optionCheck.invalid(
      'scope',
      'is required: a function of the request returning the principal (user, account, API client) the key belongs to',
    );
  }
  if (options.onResult !== undefined && typeof options.onResult !== 'function') {
    throw optionCheck.invalid('onResult', 'must be a function');
  }
}
