/**
 * `@once/core/typeorm`: a TypeORM handler processed effectively once. TypeORM opens the
 * transaction (`dataSource.transaction(fn)`, a query runner of its own); once claims the message
 * inside it through the transaction's query runner, hands your handler TypeORM's transactional
 * `EntityManager` as `ctx.tx`, and settles the broker only after TypeORM's COMMIT resolved.
 *
 * ```ts
 * const inbox = createInbox({ pool, consumer: 'billing.orders',
 *   ...withTypeorm(dataSource, async (message, { tx }) => { await tx.insert(Charge, { ... }) }) });
 * ```
 */
import type { DataSource, EntityManager } from 'typeorm';
import { ErrorCode, OnceError } from '../errors.js';
import type { BoundHandler, InboxBinding } from '../handler/binding.js';
import { ownedBinding } from '../handler/binding.js';
import type { CallerTransactions } from '../pg/caller-transactions.js';

export type { BoundContext, BoundHandler, InboxBinding } from '../handler/binding.js';

/** TypeORM's isolation levels. */
export type TypeormIsolationLevel =
  | 'READ UNCOMMITTED'
  | 'READ COMMITTED'
  | 'REPEATABLE READ'
  | 'SERIALIZABLE';

/** Options of {@link withTypeorm}. */
export interface WithTypeormOptions {
  /** The isolation level TypeORM opens the message's transaction with. @default the database's */
  isolationLevel?: TypeormIsolationLevel | undefined;
}

/**
 * Binds a TypeORM handler: returns the inbox's `handler` and `transactions`, to spread into
 * `createInbox` or an adapter's options. The handler receives the transaction's
 * `EntityManager` as `ctx.tx`. TypeORM has no transaction timeout: at once's deadline the body
 * rejects, TypeORM rolls back and releases its query runner, and a later query through the
 * manager fails (QueryRunnerAlreadyReleasedError).
 */
export function withTypeorm<R = unknown>(
  dataSource: Pick<DataSource, 'transaction'>,
  handler: BoundHandler<EntityManager, R>,
  options: WithTypeormOptions = {},
): InboxBinding<R> & {
  /** Always set: the inbox claims inside the library's transactions. */
  mode: {
    /** How the inbox opens, runs statements in and commits the library's transactions. */
    transactions: CallerTransactions<EntityManager>;
  };
} {
  if (typeof dataSource?.transaction !== 'function') {
    throw new OnceError(ErrorCode.InvalidOption, 'withTypeorm: dataSource must be a TypeORM DataSource');
  }
  const level = options.isolationLevel;
  const transactions: CallerTransactions<EntityManager> = {
    run: (body) => (level ? dataSource.transaction(level, body) : dataSource.transaction(body)),
    query: async (manager, text, values) => {
      const runner = manager.queryRunner;
      if (!runner) {
        throw new OnceError(ErrorCode.InvalidOption, 'withTypeorm: the EntityManager has no query runner');
      }
      const res = (await runner.query(text, values, true)) as { records?: unknown[]; affected?: number };
      const rows = (res.records ?? []) as Record<string, unknown>[];
      return { rows, rowCount: res.affected ?? rows.length };
    },
  };
  return ownedBinding('withTypeorm', handler, transactions);
}
