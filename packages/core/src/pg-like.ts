/**
 * The few shapes of node-postgres that core relies on. Declared structurally so users
 * bring their own `pg` (any 8.x) and tests may wrap a pool to inject faults.
 */
export interface QueryResultLike<R = Record<string, unknown>> {
  rows: R[];
  rowCount: number | null;
  /** The command tag: `COMMIT` turns into `ROLLBACK` when the transaction had failed. */
  command?: string;
}

/** A connection checked out of a pool. */
export interface PgClientLike {
  // biome-ignore lint/suspicious/noExplicitAny: mirrors pg's own signature so pg.PoolClient fits
  query<R = any>(text: string, values?: unknown[]): Promise<QueryResultLike<R>>;
  /** Return to the pool; an error (or `true`) destroys the connection instead. */
  release(err?: Error | boolean): void;
  on?(event: 'error', listener: (err: Error) => void): unknown;
  off?(event: 'error', listener: (err: Error) => void): unknown;
}

/** A connection pool, such as `new pg.Pool()`. */
export interface PgPoolLike {
  connect(): Promise<PgClientLike>;
  // biome-ignore lint/suspicious/noExplicitAny: mirrors pg's own signature so pg.Pool fits
  query<R = any>(text: string, values?: unknown[]): Promise<QueryResultLike<R>>;
}
