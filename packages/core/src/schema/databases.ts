import { ErrorCode, OnceError } from '../errors.js';
import { checkDurationMs, invalidOption } from '../option-check.js';
import type { PgPoolLike } from '../pg/pg-like.js';
import { classifyDbError, isEnvironmental } from '../pg/sqlstate.js';
import { sleep } from '../sleep.js';
import { type MigrateOptions, type MigrateResult, migrate } from './migrate.js';
import { type PurgeOptions, purge } from './purge.js';

/**
 * A set of named databases: name → pool. A name is 1 to 63 characters of `[A-Za-z0-9_.-]`, short
 * and plain enough to head a log line or key a JSON object as it is (a tenant id, a shard number).
 */
export type NamedDatabases = Readonly<Record<string, PgPoolLike>>;

/** The shape of a database name of {@link NamedDatabases}. */
export const DATABASE_NAME_PATTERN: RegExp = /^[A-Za-z0-9_.-]{1,63}$/;

/** One database's failure in {@link DatabasesError.results}: the error as it was thrown. */
export interface DatabaseFailure {
  /** The database's name. */
  name: string;
  /** What its operation threw. */
  error: unknown;
}

/** What {@link migrateDatabases} did to one database. */
export interface DatabaseMigrated {
  /** The database's name. */
  name: string;
  /** Its {@link migrate} result. */
  result: MigrateResult;
}

/** What {@link purgeDatabases} did to one database. */
export interface DatabasePurged {
  /** The database's name. */
  name: string;
  /** Rows deleted in it. */
  deleted: number;
}

/**
 * An operation over {@link NamedDatabases} failed in at least one of them (`MIGRATE_FAILED`,
 * `PURGE_FAILED`). The message names each failed database and its error's code; `results` holds
 * every database's outcome in order, the ones that succeeded included, so a caller sees what was
 * done. `retryable` when every failure was (a refused connection is; `SCHEMA_TOO_NEW` is not).
 */
export class DatabasesError<
  S extends { name: string } = DatabaseMigrated | DatabasePurged,
> extends OnceError {
  /** Each database's outcome, in the order given: its result, or its failure. */
  readonly results: readonly (S | DatabaseFailure)[];

  constructor(
    code: typeof ErrorCode.MigrateFailed | typeof ErrorCode.PurgeFailed,
    operation: string,
    results: readonly (S | DatabaseFailure)[],
  ) {
    const failed = results.filter(isFailure);
    super(
      code,
      `${operation} failed in ${failed.length} of ${results.length} databases: ${failed
        .map((f) => `${f.name} (${codeOf(f.error)}: ${messageOf(f.error)})`)
        .join('; ')}`,
      { retryable: failed.every((f) => retryable(f.error)) },
    );
    this.name = 'DatabasesError';
    this.results = results;
  }
}

/**
 * A OnceError's own flag; a driver's error when the one SQLSTATE classifier calls it a fault of
 * the environment, except a missing schema (migrate installs it; anything else waits for that).
 */
function retryable(err: unknown): boolean {
  if (OnceError.is(err)) return err.retryable;
  const kind = classifyDbError(err);
  return isEnvironmental(kind) && kind !== 'schema-missing';
}

function isFailure(outcome: { name: string }): outcome is DatabaseFailure {
  return 'error' in outcome;
}

/** A OnceError's code, a SQLSTATE or a socket error's (`ECONNREFUSED`), else the error's name. */
function codeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code) return code;
  return err instanceof Error ? err.name : 'NonError';
}

function messageOf(err: unknown): string {
  // An AggregateError (a host with several addresses refusing) carries its reason in its parts.
  if (err instanceof AggregateError && !err.message) return err.errors.map(messageOf).join(', ');
  return err instanceof Error ? err.message : String(err);
}

/**
 * Refuses a set that is empty, not an object, or holds a bad name or a value that is not a pool
 * (`INVALID_OPTION`, naming `databases` or `databases.<name>`); returns its entries in order. The
 * functions over a set and the inbox's `databases` call it; adapters get it from
 * `@once/core/adapter`.
 */
export function checkDatabases(databases: unknown): [string, PgPoolLike][] {
  if (typeof databases !== 'object' || databases === null || Array.isArray(databases)) {
    throw invalidOption('databases', `must be an object of name → pool, got ${describe(databases)}`);
  }
  const entries = Object.entries(databases as Record<string, unknown>);
  if (entries.length === 0) throw invalidOption('databases', 'must name at least one database');
  for (const [name, pool] of entries) {
    if (!DATABASE_NAME_PATTERN.test(name)) {
      throw invalidOption(
        `databases.${name}`,
        `is not a database name: 1 to 63 characters of [A-Za-z0-9_.-], got ${JSON.stringify(name)}`,
      );
    }
    const p = pool as Partial<PgPoolLike> | null;
    if (
      typeof p !== 'object' ||
      p === null ||
      typeof p.query !== 'function' ||
      typeof p.connect !== 'function'
    ) {
      throw invalidOption(`databases.${name}`, `must be a pg Pool, got ${describe(pool)}`);
    }
  }
  return entries as [string, PgPoolLike][];
}

function describe(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

/**
 * {@link migrate} on each of a set of databases, one at a time in the order given (an object's:
 * names that are array indexes, such as `'0'`, come first, in numeric order), so a hundred
 * tenant databases take one connection at a time rather than a hundred at once (a pool opens its
 * connections only when asked). Each database judges its own schema: one newer than this build
 * is refused (`SCHEMA_TOO_NEW`) there alone, and a failure in one database does not stop the
 * others. Resolves with each database's result when all succeeded; otherwise, after trying every
 * one, throws a {@link DatabasesError} (`MIGRATE_FAILED`) naming each failed database and
 * carrying every database's outcome.
 */
export async function migrateDatabases(
  databases: NamedDatabases,
  options: MigrateOptions = {},
): Promise<DatabaseMigrated[]> {
  const entries = checkDatabases(databases);
  const results: (DatabaseMigrated | DatabaseFailure)[] = [];
  for (const [name, pool] of entries) {
    try {
      results.push({ name, result: await migrate(pool, options) });
    } catch (error) {
      results.push({ name, error });
    }
  }
  return settled(ErrorCode.MigrateFailed, 'migrate', results);
}

/** Options of {@link purgeDatabases}. */
export interface PurgeDatabasesOptions extends Omit<PurgeOptions, 'onProgress'> {
  /**
   * The pause between one database's purge and the next one's, in ms: purges of many databases
   * on one server are paced rather than run back to back. @default 1000
   */
  pauseBetweenMs?: number;
  /** Called after each batch with the database's name and its running total. */
  onProgress?: (name: string, deleted: number) => void;
}

/**
 * {@link purge} on each of a set of databases, one at a time in the order given, with
 * `pauseBetweenMs` between them; the purge options (batch size, rate, bounds) apply to each
 * database alone. A failure in one database does not stop the others. Resolves with the rows
 * deleted in each when all succeeded; otherwise, after trying every one, throws a
 * {@link DatabasesError} (`PURGE_FAILED`) naming each failed database and carrying every
 * database's outcome. An aborted `signal` stops the purge between batches and databases: the
 * databases not reached are left out of the result.
 */
export async function purgeDatabases(
  databases: NamedDatabases,
  options: PurgeDatabasesOptions = {},
): Promise<DatabasePurged[]> {
  const entries = checkDatabases(databases);
  const { pauseBetweenMs, onProgress, ...purgeOptions } = options;
  const pause = checkDurationMs('pauseBetweenMs', pauseBetweenMs ?? 1000);
  const results: (DatabasePurged | DatabaseFailure)[] = [];
  for (const [i, [name, pool]] of entries.entries()) {
    if (options.signal?.aborted) break;
    if (i > 0 && pause > 0) {
      await sleep(pause, options.signal);
      if (options.signal?.aborted) break;
    }
    try {
      const deleted = await purge(pool, {
        ...purgeOptions,
        ...(onProgress ? { onProgress: (n: number) => onProgress(name, n) } : {}),
      });
      results.push({ name, deleted });
    } catch (error) {
      results.push({ name, error });
    }
  }
  return settled(ErrorCode.PurgeFailed, 'purge', results);
}

function settled<S extends { name: string }>(
  code: typeof ErrorCode.MigrateFailed | typeof ErrorCode.PurgeFailed,
  operation: string,
  results: (S | DatabaseFailure)[],
): S[] {
  if (results.some(isFailure)) throw new DatabasesError<S>(code, operation, results);
  return results as S[];
}
