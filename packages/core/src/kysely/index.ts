/**
 * `@once/core/kysely`: a Kysely handler processed effectively once. once opens the message's
 * transaction and claims the message in it, as for a plain handler; your handler receives a
 * Kysely `Transaction<DB>` whose every query runs in that transaction (through `ctx.tx`, so it is
 * revoked when the message settles). Kysely never sends BEGIN, COMMIT or ROLLBACK here: once does.
 * `trx.transaction()` is refused by Kysely; savepoints (`trx.savepoint()`) work.
 *
 * ```ts
 * const inbox = createInbox({ pool, consumer: 'billing.orders',
 *   ...withKysely<Database>(async (message, { tx }) => { await tx.insertInto('charges').values({ ... }).execute() }) });
 * ```
 */
import {
  Kysely,
  type KyselyPlugin,
  PostgresAdapter,
  PostgresDriver,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type Transaction,
} from 'kysely';
import type { BoundHandler, InboxBinding } from '../handler/binding.js';
import { boundContext, checkBoundHandler } from '../handler/binding.js';
import type { Tx } from '../handler/handler.js';

export type { BoundContext, BoundHandler, InboxBinding } from '../handler/binding.js';

/** Options of {@link withKysely}. */
export interface WithKyselyOptions {
  /** Kysely plugins (CamelCasePlugin, ...), as for `new Kysely({ plugins })`. */
  plugins?: KyselyPlugin[] | undefined;
}

/** Kysely's Postgres driver over `ctx.tx`: the transaction is once's, so it never begins or ends one. */
class OnceTxDriver extends PostgresDriver {
  override async beginTransaction(): Promise<void> {}
  override async commitTransaction(): Promise<void> {}
  override async rollbackTransaction(): Promise<void> {}
}

/** The one "connection" a message's Kysely has: `ctx.tx`, never really released. */
function poolOver(tx: Tx) {
  const client = {
    query: (text: string, values?: unknown[]) => tx.query(text, values),
    release: () => {},
  };
  return { connect: async () => client, end: async () => {} };
}

/** A Kysely whose every query runs in `tx`. It holds no resources: make one per message. */
export function kyselyOn<DB>(tx: Tx, options: WithKyselyOptions = {}): Kysely<DB> {
  return new Kysely<DB>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      // biome-ignore lint/suspicious/noExplicitAny: pg's Pool type, which Kysely's config names, is not ours to import
      createDriver: () => new OnceTxDriver({ pool: poolOver(tx) as any }),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
    ...(options.plugins ? { plugins: options.plugins } : {}),
  });
}

/**
 * Binds a Kysely handler: returns the inbox's `handler`, to spread into `createInbox` or an
 * adapter's options. The handler receives a `Transaction<DB>` on the message's transaction as
 * `ctx.tx`; repository functions that take a `Transaction<DB>` (or a `Kysely<DB>`) work as they are.
 */
export function withKysely<DB, R = unknown>(
  handler: BoundHandler<Transaction<DB>, R>,
  options: WithKyselyOptions = {},
): InboxBinding<R> {
  checkBoundHandler('withKysely', handler);
  return {
    handler: (envelope, ctx) =>
      kyselyOn<DB>(ctx.tx, options)
        .transaction()
        .execute((trx) => Promise.resolve(handler(envelope, boundContext(ctx, trx)))),
  };
}
