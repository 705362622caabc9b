/** Every error code once raises. */
export const ErrorCode = {
  InvalidOption: 'INVALID_OPTION',
  InvalidIdentifier: 'INVALID_IDENTIFIER',
  InvalidId: 'INVALID_ID',
  SchemaNotInstalled: 'SCHEMA_NOT_INSTALLED',
  SchemaTooNew: 'SCHEMA_TOO_NEW',
  ResultNotSerializable: 'RESULT_NOT_SERIALIZABLE',
  HandlerTimeout: 'HANDLER_TIMEOUT',
  TxRevoked: 'TX_REVOKED',
  CommitRolledBack: 'COMMIT_ROLLED_BACK',
  Permanent: 'PERMANENT',
  Database: 'DATABASE',
  Closed: 'CLOSED',
  OutboxInvalid: 'OUTBOX_INVALID',
  AttemptsExhausted: 'ATTEMPTS_EXHAUSTED',
  StatementTimeout: 'STATEMENT_TIMEOUT',
  ConnectTimeout: 'CONNECT_TIMEOUT',
  UnknownEvent: 'UNKNOWN_EVENT',
  /** Lease mode: another worker took the message over (or the lease could not be renewed in time): stop. */
  LeaseLost: 'LEASE_LOST',
  /** Lease mode: a step name is empty, too long, or not a string. */
  InvalidStepName: 'INVALID_STEP_NAME',
  /** Lease mode: the same step name ran twice in one handler run. */
  StepNameReused: 'STEP_NAME_REUSED',
  /** Lease mode: a step started while another step of the same message was still running. */
  StepsConcurrent: 'STEPS_CONCURRENT',
  /** Lease mode: a step's result cannot be stored as JSON. */
  StepResultNotSerializable: 'STEP_RESULT_NOT_SERIALIZABLE',
  /** Lease mode: a step was called after the handler had settled. */
  StepAfterSettle: 'STEP_AFTER_SETTLE',
  /** `ctx.step` in a consumer that is not in lease mode. */
  StepNeedsLease: 'STEP_NEEDS_LEASE',
  /** Relay: a publisher call outlived `publishTimeoutMs`: aborted, its rows left pending, attempts unchanged. */
  PublishTimeout: 'PUBLISH_TIMEOUT',
  /** `migrateDatabases`: migrate failed in one or more of the databases (the error's `results` say which). */
  MigrateFailed: 'MIGRATE_FAILED',
  /** `purgeDatabases`: purge failed in one or more of the databases (the error's `results` say which). */
  PurgeFailed: 'PURGE_FAILED',
  /** An inbox over several databases: `route()` threw, named no database of the set, or sent an id or key to a second database. */
  Unroutable: 'UNROUTABLE',
  /** `copyInboxRows`: the two databases' once schemas are at different versions. */
  SchemaMismatch: 'SCHEMA_MISMATCH',
} as const;
/** One of {@link ErrorCode}'s values. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

// A symbol from the global registry survives two copies of @once/core in one process,
// where `instanceof` would not.
const BRAND = Symbol.for('@once/core.OnceError');

/** The one error class of once: a stable `code`, a `retryable` flag and the `cause`. */
export class OnceError extends Error {
  /** A stable code: one of {@link ErrorCode}'s, or an adapter's own. */
  readonly code: ErrorCode | (string & {});
  /** True when trying again later may succeed (a fault of the environment, not of the input). */
  readonly retryable: boolean;

  constructor(
    code: ErrorCode | (string & {}),
    message: string,
    options: { retryable?: boolean; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'OnceError';
    this.code = code;
    this.retryable = options.retryable ?? false;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** True for errors made by any copy of @once/core. */
  static is(err: unknown): err is OnceError {
    return typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[BRAND] === true;
  }
}

/**
 * Throw this from a handler when retrying cannot help (a malformed body, a rule the message
 * breaks). The message is recorded `failed` and dead-lettered at once.
 */
export class PermanentError extends OnceError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(ErrorCode.Permanent, message, { retryable: false, ...options });
    this.name = 'PermanentError';
  }

  /** True for a PermanentError, also one made by another copy of @once/core. */
  static override is(err: unknown): err is PermanentError {
    return OnceError.is(err) && err.code === ErrorCode.Permanent;
  }
}

/**
 * Thrown by an adapter's guard instead of running a message that has been started `maxAttempts`
 * times without ever completing: the consumer most likely died while running it (process exit,
 * out of memory, SIGKILL), which no catch block sees. Core records it `failed` with the reason
 * `max-attempts` and the adapter dead-letters it, unrun.
 */
export class AttemptsExhaustedError extends OnceError {
  /** How many times it was started without completing, this start included. */
  readonly starts: number;

  constructor(starts: number, maxAttempts: number, detail = '') {
    super(
      ErrorCode.AttemptsExhausted,
      `started ${starts} times (maxAttempts ${maxAttempts}) without completing${detail ? ` (${detail})` : ''}: ` +
        'the consumer most likely died while running it (process exit, out of memory, SIGKILL); ' +
        'dead-lettered without running it again',
      { retryable: false },
    );
    this.name = 'AttemptsExhaustedError';
    this.starts = starts;
  }
}

/** The id of a message is missing or unusable; the message is dead-lettered with this reason. */
export class InvalidIdError extends OnceError {
  /** What was found where the id should be, for operators. */
  readonly received: unknown;
  constructor(message: string, received: unknown) {
    super(ErrorCode.InvalidId, message);
    this.name = 'InvalidIdError';
    this.received = received;
  }
}

/** A JSON-friendly form of an error, stored with `failed` rows and sent in dead-letter headers. */
export interface SerializedError {
  /** The error's class name. */
  name: string;
  /** The error's message. */
  message: string;
  /** The error's `code`, when it has one (a OnceError's, a SQLSTATE). */
  code?: string;
  /** The stack trace, when there is one. */
  stack?: string;
  /** What a thrown non-Error object carried (its own enumerable fields, JSON-safe). */
  fields?: Record<string, unknown>;
}

/**
 * The JSON-friendly form of any thrown value. An error already in that form (a publisher's
 * per-message result, an outcome's error passed on) is kept as it is, not wrapped again.
 */
export function serializeError(err: unknown): SerializedError {
  if (isSerializedError(err)) return err;
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return {
      name: err.name,
      message: err.message,
      ...(typeof code === 'string' ? { code } : {}),
      ...(err.stack ? { stack: err.stack.split('\n').slice(0, 12).join('\n') } : {}),
    };
  }
  if (typeof err === 'object' && err !== null) {
    const fields = jsonSafe(err);
    return {
      name: 'NonError',
      message: fields === undefined ? String(err) : JSON.stringify(fields).slice(0, 2_000),
      ...(typeof (err as { code?: unknown }).code === 'string'
        ? { code: (err as { code: string }).code }
        : {}),
      ...(fields && typeof fields === 'object' && !Array.isArray(fields)
        ? { fields: fields as Record<string, unknown> }
        : {}),
    };
  }
  return { name: 'NonError', message: String(err) };
}

/** A JSON copy of a thrown object, or undefined when it has none (a cycle, a BigInt). */
function jsonSafe(value: object): unknown {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isSerializedError(e: unknown): e is SerializedError {
  return (
    typeof e === 'object' &&
    e !== null &&
    !(e instanceof Error) &&
    typeof (e as SerializedError).name === 'string' &&
    typeof (e as SerializedError).message === 'string'
  );
}

/** The handler ran past `handlerTimeoutMs`. */
export class DeadlineError extends OnceError {
  constructor(ms: number) {
    super(ErrorCode.HandlerTimeout, `handler did not settle within handlerTimeoutMs (${ms} ms)`, {
      retryable: true,
    });
  }
}
