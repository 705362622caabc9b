import { type Envelope, type Handler, type HandlerContext, PermanentError } from '@once/core';

/**
 * Wraps a handler that takes a parsed JSON body. A body that is not JSON is a PermanentError:
 * retrying cannot fix it, so the message is recorded failed and dead-lettered at once.
 */
export function jsonHandler<T, R = unknown>(
  handler: (body: T, envelope: Envelope, ctx: HandlerContext) => Promise<R> | R,
): Handler<R> {
  return (envelope, ctx) => {
    let body: T;
    try {
      body = JSON.parse(envelope.body.toString('utf8')) as T;
    } catch (err) {
      throw new PermanentError(`the message body is not JSON: ${(err as Error).message}`, { cause: err });
    }
    return handler(body, envelope, ctx);
  };
}
