import { ErrorCode, OnceError } from './errors.js';

/**
 * Checks a duration or count; names the field when it is wrong. A leaf module, so the outbox
 * (whose type the inbox's options name) can use it without importing the inbox's options.
 */
export function checkNumber(field: string, value: unknown, min: number, integer = true): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
    throw invalid(field, `must be a finite ${integer ? 'integer' : 'number'}, got ${JSON.stringify(value)}`);
  }
  if (value < min) throw invalid(field, `must be at least ${min}, got ${value}`);
  return value;
}

function invalid(field: string, message: string): OnceError {
  return new OnceError(ErrorCode.InvalidOption, `options.${field} ${message}`);
}
