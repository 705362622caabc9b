/** What a database error means for the message being processed. */
export type DbErrorClass =
  /** lock_timeout passed while waiting on another worker's claim (55P03). */
  | 'busy'
  /** Serialization failure or deadlock (40001, 40P01): run the message again, at once. */
  | 'conflict-retry'
  /** The connection is gone, its state unknown, or the server cannot take it now: destroy it, run again. */
  | 'connection'
  /** A statement was cancelled: statement_timeout or a cancel request (57014). */
  | 'timeout'
  /** The schema or a table is missing: a setup problem, not a message problem. */
  | 'schema-missing'
  /**
   * The message's own doing: data it carries or writes that PostgreSQL refuses (class 22, e.g.
   * 22P05, 22021), an integrity violation (class 23, also raised at COMMIT by deferred
   * constraints), a program limit (54000), or a statement in a transaction a failed statement had
   * already aborted (25P02). Counts toward the message's attempts.
   */
  | 'message'
  /** Anything else, from PostgreSQL or not. */
  | 'other';

const CONNECTION_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  // once's own bounds (bounded-pool.ts): the connection was destroyed, or none came.
  'STATEMENT_TIMEOUT',
  'CONNECT_TIMEOUT',
]);

/**
 * The one place SQLSTATEs are interpreted.
 * - 55P03 lock_not_available: our lock_timeout fired.
 * - 40001 serialization_failure, 40P01 deadlock_detected: the transaction lost a race.
 * - class 08 (connection exception), 57P01-57P03 (admin shutdown, crash shutdown, cannot connect
 *   now), class 53 (insufficient resources: too many connections, out of memory or disk),
 *   25006 (read-only transaction: the server became a standby during a failover): the
 *   environment, not the message.
 * - 57014 query_canceled: a statement or lock wait ran out of time.
 * - 42P01 undefined_table, 3F000 invalid_schema_name: once's tables are not installed.
 * - class 22 (data exception), class 23 (integrity constraint violation), 54000
 *   (program_limit_exceeded), 25P02 (in_failed_sql_transaction): the message.
 */
export function classifyDbError(err: unknown): DbErrorClass {
  if (typeof err !== 'object' || err === null) return 'other';
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (code === '55P03') return 'busy';
    if (code === '40001' || code === '40P01') return 'conflict-retry';
    if (
      code.startsWith('08') ||
      code.startsWith('53') ||
      code === '57P01' ||
      code === '57P02' ||
      code === '57P03' ||
      code === '25006'
    ) {
      return 'connection';
    }
    if (code === '57014') return 'timeout';
    if (code === '42P01' || code === '3F000') return 'schema-missing';
    if (code.startsWith('22') || code.startsWith('23') || code === '54000' || code === '25P02') {
      return 'message';
    }
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

/**
 * True for faults of the environment: they never count toward a message's attempts and never
 * dead-letter it, however often they happen.
 */
export function isEnvironmental(kind: DbErrorClass): boolean {
  return (
    kind === 'busy' ||
    kind === 'conflict-retry' ||
    kind === 'connection' ||
    kind === 'timeout' ||
    kind === 'schema-missing'
  );
}
