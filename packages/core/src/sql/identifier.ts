import { ErrorCode, OnceError } from '../errors.js';

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Validates a schema name and returns it double-quoted. Only lower-case letters, digits and
 * underscores are accepted, so nothing a user passes can ever change the SQL around it.
 */
export function quoteIdentifier(name: unknown, field = 'schema'): string {
  if (typeof name !== 'string' || !IDENTIFIER.test(name)) {
    throw new OnceError(
      ErrorCode.InvalidIdentifier,
      `${field} must be a lower-case SQL identifier (letters, digits, _; at most 63 characters), got ${JSON.stringify(name)}`,
    );
  }
  return `"${name}"`;
}
