import { ErrorCode } from '@once/core';
import { LATEST_SCHEMA_VERSION, quoteIdentifier, readSchemaState, type SchemaState } from '@once/core/admin';
import pg from 'pg';
import { CliError } from './cli-error.js';
import { checkDatabaseUrl } from './database-url.js';
import { ExitCode } from './exit-codes.js';
import { maskUrl } from './mask-url.js';

/** What a command needs from the database. */
export interface Database {
  readonly pool: pg.Pool;
  /** The schema name, validated. */
  readonly schema: string;
  /** The URL with its password masked, for messages. */
  readonly maskedUrl: string;
}

/** The CLI's bound on one statement's reply, in ms: as long as migrate()'s own. */
export const CLI_STATEMENT_TIMEOUT_MS = 300_000;

/** Where and how {@link openDatabase} connects. */
export interface DatabaseOptions {
  /** A `postgres://` URL. */
  readonly url: string;
  /** once's schema name. */
  readonly schema: string;
  /** Give up connecting after this many ms. @default 10000 */
  readonly connectTimeoutMs?: number;
  /** Where the URL came from, for messages. @default '--database-url' */
  readonly urlSource?: string;
}

/**
 * Validates the URL and schema, then opens a small pool and proves it with one connection.
 * Any failure to connect (refused, timed out, authentication, unknown database) is exit 3
 * with the URL, password masked: before this point nothing is known to be wrong with the
 * command itself. The caller ends the pool.
 */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  // Validated before anything else: a bad name is a usage error, whatever the URL.
  quoteIdentifier(options.schema, '--schema');
  checkDatabaseUrl(options.url, options.urlSource ?? '--database-url');
  const maskedUrl = maskUrl(options.url);
  const pool = new pg.Pool({
    connectionString: options.url,
    max: 2,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    // A path that goes dark must end the command, not hang it (docs/operations.md, "Pool settings"):
    // keepalive for a socket waiting on a reply, and a bound on every statement (core's purge and
    // migrate bound theirs too; migrations' DDL is why this one is long).
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    query_timeout: CLI_STATEMENT_TIMEOUT_MS,
    application_name: 'once-cli',
  });
  // An idle client's error (a restarted server) must not crash the CLI (brianc/node-postgres#1324).
  pool.on('error', () => {});
  try {
    const client = await pool.connect();
    client.release();
  } catch (err) {
    await pool.end().catch(() => {});
    throw new CliError(
      ExitCode.Unreachable,
      'DATABASE_UNREACHABLE',
      `cannot connect to ${maskedUrl}: ${reason(err)}`,
      {
        cause: err,
      },
    );
  }
  return { pool, schema: options.schema, maskedUrl };
}

/**
 * Where the installed schema stands, at least version 1. Exit 4 when the schema is not installed
 * or is newer and removed something this build uses (`too-new`); an older version, or a newer
 * one this build still runs on (`ahead`), is returned for the caller to judge.
 */
export async function schemaState(db: Database): Promise<SchemaState> {
  const state = await readSchemaState(db.pool, db.schema);
  if (state.status === 'not-installed') {
    throw new CliError(
      ExitCode.Schema,
      ErrorCode.SchemaNotInstalled,
      `schema ${db.schema} is not installed: run \`${migrateCommandLine(db.schema)}\``,
    );
  }
  refuseTooNew(state);
  return state;
}

/** Exit 4 for a newer schema that removed something this build uses, saying what and what to upgrade. */
export function refuseTooNew(state: SchemaState): void {
  if (state.status !== 'too-new') return;
  throw new CliError(
    ExitCode.Schema,
    ErrorCode.SchemaTooNew,
    `${state.tooNew}; this once is at schema version ${LATEST_SCHEMA_VERSION}: upgrade @once/cli`,
  );
}

/** Exit 4 unless the schema is installed at the version this build expects, or a newer one it runs on. */
export async function requireSchema(db: Database): Promise<void> {
  const { version } = await schemaState(db);
  if (version < LATEST_SCHEMA_VERSION) {
    throw new CliError(
      ExitCode.Schema,
      ErrorCode.SchemaNotInstalled,
      `schema ${db.schema} is at version ${version}, this once needs ${LATEST_SCHEMA_VERSION}: run \`${migrateCommandLine(db.schema)}\``,
    );
  }
}

/** `once migrate`, with `--schema` when it is not the default. */
export function migrateCommandLine(schema: string): string {
  return schema === 'once' ? 'once migrate' : `once migrate --schema ${schema}`;
}

/**
 * One line saying why a connection failed. Node reports a refused connection to a name with
 * several addresses as an AggregateError with an empty message; its first inner error is the
 * useful one. pg's own messages (authentication, unknown database) are already clear.
 */
export function reason(err: unknown): string {
  if (err instanceof AggregateError && err.message === '' && err.errors.length > 0)
    return reason(err.errors[0]);
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const msg = err.message || String(code ?? err.name);
    return typeof code === 'string' && !msg.includes(code) ? `${msg} (${code})` : msg;
  }
  return String(err);
}
