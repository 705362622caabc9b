import type { LeaseSettings, Logger, Outbox, PgPoolLike } from '@once/core';
import { optionCheck } from '@once/core/adapter';
import { placeOf, type RequestRouter } from './databases.js';
import type { ProblemFormat } from './problem-details.js';

export type { RequestRouter } from './databases.js';

/** Options of {@link createIdempotency}. */
export interface IdempotencyOptions {
  /**
   * The pool the key's transaction runs on (`new pg.Pool(...)`). Give `pool`, or `databases` and
   * `route` for requests spread over several databases.
   */
  pool?: PgPoolLike | undefined;
  /**
   * Several databases, name → pool (names of 1 to 63 characters of `[A-Za-z0-9_.-]`), instead of
   * one `pool`: a database per tenant, or shards. Everything about a key (its claim, the
   * handler's transaction, the stored response, its replays, 409s and 422s) and a request
   * without a key live in the one database `route` names for the request. Every database needs
   * once's schema (`migrateDatabases`).
   */
  databases?: Readonly<Record<string, PgPoolLike>> | undefined;
  /**
   * With `databases`: the name of the database a request belongs in (see {@link RequestRouter}).
   * A key (scope and `Idempotency-Key`) routed to a second database within this process is
   * refused with 500 `unroutable`, as a router that throws or names no database is.
   */
  route?: RequestRouter | undefined;
  /**
   * The consumer name the keys are recorded under in once's inbox: one per service (or per group
   * of routes sharing keys). At most 200 bytes of UTF-8. Shown by `once inspect` and `once status`.
   * @default 'http'
   */
  consumer?: string | undefined;
  /** Schema holding once's tables. @default 'once' */
  schema?: string | undefined;
  /**
   * `transaction`: the handler's writes, the key and the response commit in one transaction.
   * `lease`, or `{ lease: { leaseMs } }` to set the lease (how long a claim holds the key without
   * a heartbeat, 30000 ms by default): for effects outside PostgreSQL through `ctx.step`; the key
   * is claimed with a lease in its own short transaction, and a retry while it is held answers
   * 409 until it expires.
   * @default 'transaction'
   */
  mode?:
    | 'transaction'
    | 'lease'
    | {
        /**
         * Lease mode with its settings (`leaseMs`: how long a claim holds the key without a
         * heartbeat, 30000 ms by default).
         */
        lease: LeaseSettings;
      }
    | undefined;
  /** Enables `ctx.publish`: messages go into this outbox in the request's transaction. */
  outbox?: Outbox | undefined;
  /** How long a completed key (and its stored response) is kept, in ms; `purge()` removes it after. @default 24 h */
  retentionMs?: number | undefined;
  /**
   * How long the claim waits for a concurrent request holding the same key before answering 409
   * (PostgreSQL's `lock_timeout` for the claim statement), in ms. @default 1000
   */
  lockTimeoutMs?: number | undefined;
  /** The handler's deadline in ms; past it the transaction rolls back and the client gets a 500. @default 30000 */
  handlerTimeoutMs?: number | undefined;
  /** Longest accepted key, in characters. At most 255. @default 255 */
  maxKeyLength?: number | undefined;
  /** Refuse requests without `Idempotency-Key` (400); a route may override it. @default true */
  required?: boolean | undefined;
  /** Request headers (lower-case) that join the fingerprint; a route may override it. @default ['content-type'] */
  fingerprintHeaders?: readonly string[] | undefined;
  /** The header that marks a replayed response; `false` for none. @default 'idempotent-replayed' */
  replayHeader?: string | false | undefined;
  /** Where failures are logged, `(fields, message)`; `false` silences. @default console.warn for handler errors */
  logger?: Logger | false | undefined;
  /**
   * Writes the body of the answers `@once/http` writes itself (400 `key-missing`/`key-invalid`,
   * 409 `key-in-flight`, 422 `key-mismatch`, 500 `handler-failed` and `unroutable`, 503 `unavailable`) on every
   * binding, for clients that expect another error shape: `stripeProblemFormat` gives Stripe's
   * (`{"error":{...}}`), which Stripe's SDKs throw for. Their status and headers (`Retry-After`)
   * stay. A format that throws leaves the default answer and is logged.
   * @default RFC 9457 `application/problem+json`
   */
  formatProblem?: ProblemFormat | undefined;
}

/** The defaults of {@link IdempotencyOptions}. */
export const DEFAULT_IDEMPOTENCY_OPTIONS = Object.freeze({
  consumer: 'http',
  schema: 'once',
  mode: 'transaction' as NonNullable<IdempotencyOptions['mode']>,
  retentionMs: 24 * 60 * 60 * 1000,
  lockTimeoutMs: 1_000,
  handlerTimeoutMs: 30_000,
  maxKeyLength: 255,
  required: true,
  fingerprintHeaders: Object.freeze(['content-type']) as readonly string[],
  replayHeader: 'idempotent-replayed' as string | false,
});

/** The most a key may be: with an encoded scope of at most 240 characters, ids stay within core's 512. */
export const MAX_KEY_LENGTH = 255;

// An RFC 9110 token in lower case: what a header name looks like once normalised.
const TOKEN_LOWER = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

/** Options after defaults, frozen. */
export interface ResolvedIdempotencyOptions {
  /** The pool the keys' transactions run on; undefined with `databases`. */
  readonly pool: PgPoolLike | undefined;
  /** With `databases`: name → pool, in the order given; undefined with one `pool`. */
  readonly databases: ReadonlyMap<string, PgPoolLike> | undefined;
  /** With `databases`: the request's router; undefined with one `pool`. */
  readonly route: RequestRouter | undefined;
  /** The consumer name the keys are recorded under. */
  readonly consumer: string;
  /** Once's schema. */
  readonly schema: string;
  /** Checked again, in full, by core's inbox. */
  readonly mode: NonNullable<IdempotencyOptions['mode']>;
  /** The outbox of `ctx.publish`, if any. */
  readonly outbox: Outbox | undefined;
  /** How long a completed key is kept, in ms. */
  readonly retentionMs: number;
  /** How long a claim waits for a concurrent request with the key, in ms. */
  readonly lockTimeoutMs: number;
  /** The handler's deadline, in ms. */
  readonly handlerTimeoutMs: number;
  /** Longest accepted key, in characters. */
  readonly maxKeyLength: number;
  /** Whether requests without `Idempotency-Key` are refused (400). */
  readonly required: boolean;
  /** Request headers (lower-case) that join the fingerprint. */
  readonly fingerprintHeaders: readonly string[];
  /** The header that marks a replayed response, or false. */
  readonly replayHeader: string | false;
  /** The logger as given (`undefined`: handler errors to console.warn). */
  readonly logger: Logger | false | undefined;
  /** The problem format as given. */
  readonly formatProblem: ProblemFormat | undefined;
}

/** Applies the defaults and validates every field, naming the bad one. */
export function resolveIdempotencyOptions(o: IdempotencyOptions): ResolvedIdempotencyOptions {
  return optionCheck.namingFactory('createIdempotency', () => resolve(o));
}

function resolve(o: IdempotencyOptions): ResolvedIdempotencyOptions {
  if (typeof o !== 'object' || o === null) throw optionCheck.invalid('', 'must be an object');
  const where = placeOf(o);
  const d = DEFAULT_IDEMPOTENCY_OPTIONS;
  if ((o as { leaseMs?: unknown }).leaseMs !== undefined) {
    throw optionCheck.invalid(
      'leaseMs',
      'is no longer an option of its own: write mode: { lease: { leaseMs } }',
    );
  }
  const mode = o.mode ?? d.mode;
  if (typeof mode === 'string') optionCheck.oneOf('mode', mode, ['transaction', 'lease']);
  else if (
    typeof mode !== 'object' ||
    mode === null ||
    typeof mode.lease !== 'object' ||
    mode.lease === null
  ) {
    throw optionCheck.invalid(
      'mode',
      `must be 'transaction', 'lease' or { lease: { leaseMs } }, got ${JSON.stringify(mode)}`,
    );
  }
  const headers = o.fingerprintHeaders ?? d.fingerprintHeaders;
  checkHeaderNames('fingerprintHeaders', headers);
  const replayHeader = o.replayHeader ?? d.replayHeader;
  if (replayHeader !== false && !TOKEN_LOWER.test(replayHeader)) {
    throw optionCheck.invalid('replayHeader', 'must be a lower-case header name or false');
  }
  const maxKeyLength = optionCheck.integer(
    'maxKeyLength',
    o.maxKeyLength ?? d.maxKeyLength,
    1,
    MAX_KEY_LENGTH,
  );
  return Object.freeze({
    ...where,
    consumer: optionCheck.name('consumer', o.consumer ?? d.consumer),
    schema: optionCheck.name('schema', o.schema ?? d.schema),
    mode,
    outbox: o.outbox,
    retentionMs: optionCheck.durationMs('retentionMs', o.retentionMs ?? d.retentionMs),
    lockTimeoutMs: optionCheck.durationMs('lockTimeoutMs', o.lockTimeoutMs ?? d.lockTimeoutMs),
    handlerTimeoutMs: optionCheck.durationMs('handlerTimeoutMs', o.handlerTimeoutMs ?? d.handlerTimeoutMs),
    maxKeyLength,
    required: optionCheck.boolean('required', o.required ?? d.required),
    fingerprintHeaders: Object.freeze([...headers]),
    replayHeader,
    logger: o.logger,
    formatProblem:
      o.formatProblem === undefined
        ? undefined
        : optionCheck.function<ProblemFormat>('formatProblem', o.formatProblem),
  });
}

/** Throws unless `names` is an array of lower-case header names. */
export function checkHeaderNames(field: string, names: unknown): asserts names is readonly string[] {
  if (!Array.isArray(names) || names.some((n) => typeof n !== 'string' || !TOKEN_LOWER.test(n))) {
    throw optionCheck.invalid(field, 'must be an array of lower-case header names');
  }
}
