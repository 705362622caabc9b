import { ErrorCode, OnceError } from './errors.js';
import { nearest } from './nearest.js';

/**
 * The one module of option checks, for core's factories and every adapter's. Each check names
 * the field it refuses in an `INVALID_OPTION` error, `option 'x' must be …, got …`, and returns
 * the value typed; {@link namingFactory} puts the factory in front
 * (`createKafkaConsumer: option 'batchSize' must be at least 1, got 0`). A leaf module: it imports
 * only the errors and `nearest` (itself a leaf), so the outbox, the relay and the inbox's options
 * all use it.
 */

/** An `INVALID_OPTION` error about option `field` (`''`: the options object itself). */
export function invalidOption(field: string, message: string): OnceError {
  return new OnceError(
    ErrorCode.InvalidOption,
    field ? `option '${field}' ${message}` : `options ${message}`,
  );
}

/**
 * Runs `resolve` and gives any `INVALID_OPTION` error it throws the factory's name as prefix,
 * once: `createInbox: option 'maxAttempts' must be at least 1, got 0`. An error already named
 * `createInbox` (an adapter's consumer makes its inbox) takes the outer name instead: the user
 * called `createKafkaConsumer`, not `createInbox`.
 */
export function namingFactory<T>(factory: string, resolve: () => T): T {
  try {
    return resolve();
  } catch (err) {
    if (!OnceError.is(err) || err.code !== ErrorCode.InvalidOption) throw err;
    const inner = /^(\w+): /.exec(err.message);
    if (inner && inner[1] !== 'createInbox') throw err;
    const message = inner ? err.message.slice(inner[0].length) : err.message;
    throw new OnceError(ErrorCode.InvalidOption, `${factory}: ${message}`, {
      ...(err.cause === undefined ? {} : { cause: err.cause }),
    });
  }
}

/** A finite number of at least `min`; a whole one unless `integer` is false. Core's durations and counts. */
export function checkNumber(field: string, value: unknown, min: number, integer = true): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw invalidOption(
      field,
      `must be a finite ${integer ? 'integer' : 'number'}, got ${JSON.stringify(value)}`,
    );
  }
  if (value < min) throw invalidOption(field, `must be at least ${min}, got ${value}`);
  return value;
}

/** An integer of at least `min` (a count: messages, partitions, attempts). */
export function checkInteger(field: string, value: unknown, min = 1, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw invalidOption(field, `must be an integer, got ${JSON.stringify(value)}`);
  }
  if (value < min) throw invalidOption(field, `must be at least ${min}, got ${value}`);
  if (value > max) throw invalidOption(field, `must be at most ${max}, got ${value}`);
  return value;
}

/** A duration in whole milliseconds, at least `minMs` (0 allowed by default). */
export function checkDurationMs(field: string, value: unknown, minMs = 0): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw invalidOption(field, `must be a whole number of milliseconds, got ${JSON.stringify(value)}`);
  }
  if (value < minMs) throw invalidOption(field, `must be at least ${minMs} ms, got ${value}`);
  return value;
}

/** A non-empty string of at most `maxLength` characters (a topic, queue, group or header name). */
export function checkName(field: string, value: unknown, maxLength = 255): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) {
    throw invalidOption(
      field,
      `must be a non-empty string of at most ${maxLength} characters, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** A boolean. */
export function checkBoolean(field: string, value: unknown): boolean {
  if (typeof value !== 'boolean')
    throw invalidOption(field, `must be a boolean, got ${JSON.stringify(value)}`);
  return value;
}

/** One of `allowed`. */
export function checkOneOf<T extends string>(field: string, value: unknown, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) {
    throw invalidOption(
      field,
      `must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, got ${JSON.stringify(value)}`,
    );
  }
  return value as T;
}

/** A function. */
export function checkFunction<F extends (...args: never[]) => unknown>(field: string, value: unknown): F {
  if (typeof value !== 'function') throw invalidOption(field, `must be a function, got ${typeof value}`);
  return value as F;
}

/**
 * The inbox consumer name of an adapter: the `consumer` option when given, else `fallback` (the
 * queue, group or durable the adapter reads from). A function fallback runs only when needed, so
 * a given name is never refused for a fault of the one it replaces.
 */
export function checkConsumerName(given: unknown, fallback: string | (() => string)): string {
  if (given !== undefined) return checkName('consumer', given);
  return typeof fallback === 'function' ? fallback() : fallback;
}

/**
 * Refuses, with `INVALID_OPTION`, a key of `options` that is not one of `known`, naming the nearest
 * known one (`option 'ackTimoutMs' is unknown; did you mean 'ackTimeoutMs'?`): a misspelt key
 * would otherwise be ignored and its default silently used. A key given as `undefined` counts too.
 * Anything but a plain object is left to the caller's own checks. Consumers get this from
 * `splitOptions`; a publisher calls it with its options' keys (a `Record<keyof O, true>`, so the
 * compiler keeps the list whole).
 */
export function checkKnownKeys(options: unknown, known: Readonly<Record<string, true>>): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) return;
  for (const key of Object.keys(options)) {
    if (Object.hasOwn(known, key)) continue;
    const near = nearest(key, Object.keys(known));
    throw invalidOption(key, `is unknown${near ? `; did you mean '${near}'?` : ''}`);
  }
}

/**
 * The option checks, for adapters (`@once/core/adapter`): each names the field it refuses in an
 * `INVALID_OPTION` error of one shape, `<factory>: option 'x' must be …, got …`, once the
 * factory is wrapped in {@link optionCheck.namingFactory}.
 */
export const optionCheck = Object.freeze({
  /** An `INVALID_OPTION` error about option `field` (`''`: the options object itself). */
  invalid: invalidOption,
  /** Runs `resolve`, naming `factory` in front of the `INVALID_OPTION` errors it throws. */
  namingFactory,
  /** An integer within [`min` (1), `max`]. */
  integer: checkInteger,
  /** A duration in whole milliseconds, at least `minMs` (0). */
  durationMs: checkDurationMs,
  /** A non-empty string of at most `maxLength` (255) characters. */
  name: checkName,
  /** A boolean. */
  boolean: checkBoolean,
  /** One of `allowed`. */
  oneOf: checkOneOf,
  /** A function. */
  function: checkFunction,
  /** The `consumer` option when given (checked as a name), else the fallback. */
  consumerName: checkConsumerName,
  /** Every key of the options is one of `known`, else `is unknown; did you mean …?`. */
  knownKeys: checkKnownKeys,
});
