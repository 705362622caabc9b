/**
 * `@once/core/mikro-orm`: a MikroORM handler processed effectively once. MikroORM opens the
 * transaction (`em.transactional(fn)`, on a fork of your EntityManager); once claims the message
 * inside it through the connection's raw `execute` in that transaction's context, hands your
 * handler the transaction's EntityManager as `ctx.tx`, and settles the broker only after
 * MikroORM's COMMIT (its final flush included) resolved.
 *
 * ```ts
 * const inbox = createInbox({ pool, consumer: 'billing.orders',
 *   ...withMikroOrm(orm.em, async (message, { tx }) => { tx.create(Charge, { ... }) }) });
 * ```
 */
import type { EntityManager, IsolationLevel } from '@mikro-orm/core';
import { ErrorCode, OnceError } from '../errors.js';
import type { BoundHandler, InboxBinding } from '../handler/binding.js';
import { ownedBinding } from '../handler/binding.js';
import { knexRaw } from '../knex/index.js';
import type { CallerTransactions } from '../pg/caller-transactions.js';

export type { BoundContext, BoundHandler, InboxBinding } from '../handler/binding.js';

/** Options of {@link withMikroOrm}. */
export interface WithMikroOrmOptions {
  /** The isolation level MikroORM opens the message's transaction with. @default the database's */
  isolationLevel?: IsolationLevel | undefined;
}

/** What the binding uses of a MikroORM (SQL driver) EntityManager. */
interface SqlEntityManagerLike {
  getTransactionContext(): unknown;
  getConnection(): {
    execute(sql: string, params: unknown[], method: 'all', ctx: unknown): Promise<Record<string, unknown>[]>;
  };
}

/**
 * Binds a MikroORM handler: returns the inbox's `handler` and `transactions`, to spread into
 * `createInbox` or an adapter's options. The handler receives the transaction's EntityManager (a
 * fork of `em`) as `ctx.tx`; entities it persists are flushed before the COMMIT.
 */
export function withMikroOrm<E extends EntityManager, R = unknown>(
  em: E,
  handler: BoundHandler<E, R>,
  options: WithMikroOrmOptions = {},
): InboxBinding<R> & {
  /** Always set: the inbox claims inside the library's transactions. */
  mode: {
    /** How the inbox opens, runs statements in and commits the library's transactions. */
    transactions: CallerTransactions<E>;
  };
} {
  if (typeof em?.transactional !== 'function') {
    throw new OnceError(ErrorCode.InvalidOption, 'withMikroOrm: em must be a MikroORM EntityManager');
  }
  const txOptions = options.isolationLevel ? { isolationLevel: options.isolationLevel } : {};
  const transactions: CallerTransactions<E> = {
    run: (body) => em.transactional((fork) => body(fork as E), txOptions),
    query: async (fork, text, values) => {
      const sqlEm = fork as unknown as SqlEntityManagerLike;
      const { sql, bindings } = knexRaw(text, values);
      const rows = await sqlEm.getConnection().execute(sql, bindings, 'all', sqlEm.getTransactionContext());
      return { rows, rowCount: rows.length };
    },
  };
  return ownedBinding('withMikroOrm', handler, transactions);
}
