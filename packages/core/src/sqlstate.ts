/** What a database error means for the message being processed. */
export type DbErrorClass =
  /** lock_timeout passed while waiting on another worker's claim. */
  | 'busy'
  /** Serialization failure or deadlock: run the message again. */
  | 'conflict-retry'
  /** The connection is gone or its state unknown: destroy it, run the message again. */
  | 'connection'
  /** The schema or a table is missing: a setup problem, not a message problem. */
  | 'schema-missing'
  /** Any other error from PostgreSQL (or not from PostgreSQL at all). */
  | 'other';

const CONNECTION_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);

/**
 * The one place SQLSTATEs are interpreted.
 * - 55P03 lock_not_available: our lock_timeout fired.
 * - 40001 serialization_failure, 40P01 deadlock_detected: the transaction lost a race.
 * - class 08 (connection exception), 57P01-57P03 (admin shutdown, crash shutdown, cannot
 *   connect now), 53300 (too many connections): the connection, not the message.
 * - 42P01 undefined_table, 3F000 invalid_schema_name: once's tables are not installed.
 */
export function classifyDbError(err: unknown): DbErrorClass {
  if (typeof err !== 'object' || err === null) return 'other';
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (code === '55P03') return 'busy';
    if (code === '40001' || code === '40P01') return 'conflict-retry';
    if (
      code.startsWith('08') ||
      code === '57P01' ||
      code === '57P02' ||
      code === '57P03' ||
      code === '53300'
    ) {
      return 'connection';
    }
    if (code === '42P01' || code === '3F000') return 'schema-missing';
    if (CONNECTION_CODES.has(code)) return 'connection';
  }
  const message = (err as { message?: unknown }).message;
  // node-postgres reports a dropped socket with these messages and no code.
  if (
    typeof message === 'string' &&
    /Connection terminated|connection is closed|Client was closed|Client has encountered a connection error|terminating connection/i.test(
      message,
    )
  ) {
    return 'connection';
  }
  return 'other';
}
