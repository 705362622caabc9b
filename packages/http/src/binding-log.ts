import type { Logger } from '@once/core';
import type { Idempotency } from './engine.js';

/**
 * Logs a binding's own failure (a throwing `onResult`, a response that could not be written)
 * where the engine logs: the `logger` option, console.warn when it is not given, nothing when it
 * is `false`. A failing logger is ignored: logging never changes a request's answer.
 */
export function bindingWarn(
  idempotency: Idempotency,
  fields: Record<string, unknown>,
  message: string,
): void {
  const logger: Logger | false | undefined = idempotency.options.logger;
  try {
    if (logger === false) return;
    if (logger === undefined) console.warn(message, fields);
    else logger.warn(fields, message);
  } catch {
    // a logger that throws changes nothing
  }
}

/**
 * Calls the binding's `onResult` hook; a hook that throws is logged and changes nothing (the
 * request's answer is already decided, and committed).
 */
export function reportResult<R, Q>(
  idempotency: Idempotency,
  onResult: ((result: R, request: Q) => void) | undefined,
  result: R,
  request: Q,
): void {
  if (onResult === undefined) return;
  try {
    onResult(result, request);
  } catch (err) {
    bindingWarn(idempotency, { err }, '@once/http: onResult threw; the answer is sent as it was');
  }
}
