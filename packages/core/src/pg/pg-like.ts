/**
 * The few shapes of node-postgres that core relies on. Declared structurally so users
 * bring their own `pg` (any 8.x) and tests may wrap a pool to inject faults.
 */
export interface QueryResultLike<R = Record<string, unknown>> {
  /** The rows the statement returned. */
  rows: R[];
  /** The number of rows the statement affected or returned. */
  rowCount: number | null;
  /** The command tag: `COMMIT` turns into `ROLLBACK` when the transaction had failed. */
  command?: string;
}

/**
 * node-postgres's query-config object, as drivers built on pg pass it (Drizzle's `node-postgres`
 * driver sends `rowMode: 'array'` and its own `types`). `name` makes pg prepare the statement
 * once per connection and reuse it: connections are pooled and shared by every message, so one
 * name must always stand for one text (pg refuses a name reused with another text).
 */
export interface QueryConfigLike {
  /** The SQL, with `$1`-style parameters. */
  text: string;
  /** The parameters; a `values` argument beside the config takes precedence, as in pg. */
  values?: unknown[] | undefined;
  /** Prepare the statement under this name, once per connection. */
  name?: string | undefined;
  /** `'array'`: rows as arrays in column order (the columns are in the result's `fields`). */
  rowMode?: 'array' | undefined;
  /** pg type parsers for this query (`{ getTypeParser }`). */
  types?: unknown;
}

/**
 * A connection checked out of a pool. Core's own statements pass `(text, values)`; a handler's
 * query through `ctx.tx` may pass a {@link QueryConfigLike}, which reaches the client as it is
 * (every pg 8 client takes one).
 */
export interface PgClientLike {
  /** Runs one statement with `$1`-style parameters on this connection. */
  // biome-ignore lint/suspicious/noExplicitAny: mirrors pg's own signature so pg.PoolClient fits
  query<R = any>(text: string, values?: unknown[]): Promise<QueryResultLike<R>>;
  /** Return to the pool; an error (or `true`) destroys the connection instead. */
  release(err?: Error | boolean): void;
  /** Listens for the connection's errors (pg's `client.on('error')`). */
  on?(event: 'error', listener: (err: Error) => void): unknown;
  /** Stops listening for the connection's errors. */
  off?(event: 'error', listener: (err: Error) => void): unknown;
}

/** A connection pool, such as `new pg.Pool()`. */
export interface PgPoolLike {
  /** Checks a connection out of the pool. */
  connect(): Promise<PgClientLike>;
  /** Runs one statement with `$1`-style parameters on a connection of the pool. */
  // biome-ignore lint/suspicious/noExplicitAny: mirrors pg's own signature so pg.Pool fits
  query<R = any>(text: string, values?: unknown[]): Promise<QueryResultLike<R>>;
}

/** Anything that runs a query: the handler's `ctx.tx`, or a pg client inside your own transaction. */
export interface Queryable {
  /** Runs one statement with `$1`-style parameters (the caller's transaction, for `enqueue`). */
  // biome-ignore lint/suspicious/noExplicitAny: row type chosen by the caller, as in pg
  query<R = any>(text: string, values?: unknown[]): Promise<QueryResultLike<R>>;
}
