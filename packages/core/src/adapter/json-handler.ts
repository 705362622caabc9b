import { PermanentError } from '../errors.js';
import type { Handler, HandlerContext } from '../handler/handler.js';
import type { Envelope } from '../message/envelope.js';

/**
 * Wraps a handler that takes the body as parsed JSON. A body that is not JSON is a
 * PermanentError (recorded `failed` and dead-lettered at once: retrying cannot fix it), and
 * `validate` may reject a parsed value the same way by throwing. Adapters re-export it.
 */
export function jsonHandler<T, R = unknown>(
  handler: (value: T, envelope: Envelope, ctx: HandlerContext) => Promise<R> | R,
  validate?: (value: unknown) => T,
): Handler<R> {
  return (envelope, ctx) => {
    let value: unknown;
    try {
      value = JSON.parse(envelope.body.toString('utf8'));
    } catch (err) {
      throw new PermanentError(`the body is not valid JSON: ${(err as Error).message}`, { cause: err });
    }
    if (validate) {
      try {
        value = validate(value);
      } catch (err) {
        throw new PermanentError(`the body failed validation: ${(err as Error)?.message ?? String(err)}`, {
          cause: err,
        });
      }
    }
    return handler(value as T, envelope, ctx);
  };
}
