/**
 * `@once/core/drizzle`: a Drizzle handler processed effectively once. once opens the message's
 * transaction and claims the message in it; your handler receives a Drizzle transaction
 * (`NodePgTransaction`, what `db.transaction(async (tx) => ...)` hands you) on Drizzle's own
 * `node-postgres` driver, whose every query runs in that transaction through `ctx.tx` (revoked
 * when the message settles). Drizzle's BEGIN, COMMIT and ROLLBACK of that outer transaction are
 * once's to send, so they are skipped; nested `tx.transaction()` calls are savepoints and work.
 *
 * ```ts
 * const inbox = createInbox({ pool, consumer: 'billing.orders',
 *   ...withDrizzle({ charges }, async (message, { tx }) => { await tx.insert(charges).values({ ... }) }) });
 * ```
 */
import type { ExtractTablesWithRelations } from 'drizzle-orm';
import { drizzle, type NodePgDatabase, type NodePgTransaction } from 'drizzle-orm/node-postgres';
import type { BoundHandler, InboxBinding } from '../handler/binding.js';
import { boundContext, checkBoundHandler } from '../handler/binding.js';
import type { Tx } from '../handler/handler.js';
import type { QueryConfigLike } from '../pg/pg-like.js';

export type { BoundContext, BoundHandler, InboxBinding } from '../handler/binding.js';

/** The transaction object a Drizzle handler receives. */
export type DrizzleTx<TSchema extends Record<string, unknown>> = NodePgTransaction<
  TSchema,
  ExtractTablesWithRelations<TSchema>
>;

/** Drizzle's statements for the outer transaction, which once sends itself. */
const OWN = new Set(['begin', 'commit', 'rollback']);

/** A node-postgres client over `ctx.tx` for Drizzle's driver (Drizzle passes query configs). */
function clientOver(tx: Tx) {
  return {
    query(config: string | QueryConfigLike, values?: unknown[]) {
      const text = typeof config === 'string' ? config : config.text;
      if (OWN.has(text.trim().toLowerCase())) {
        return Promise.resolve({ rows: [], rowCount: null, command: text.toUpperCase(), fields: [] });
      }
      return typeof config === 'string' ? tx.query(config, values) : tx.query(config, values);
    },
  };
}

/** A Drizzle database whose every query runs in `tx`. It holds no resources: make one per message. */
export function drizzleOn<TSchema extends Record<string, unknown>>(
  tx: Tx,
  schema?: TSchema,
): NodePgDatabase<TSchema> {
  // biome-ignore lint/suspicious/noExplicitAny: Drizzle's client type is pg's, not ours to import
  return drizzle({ client: clientOver(tx) as any, ...(schema ? { schema } : {}) }) as NodePgDatabase<TSchema>;
}

/**
 * Binds a Drizzle handler: returns the inbox's `handler`, to spread into `createInbox` or an
 * adapter's options. `schema` is your tables (and relations), as for `drizzle({ schema })`, for
 * `tx.query.<table>`; pass `{}` when you use none. The handler receives the Drizzle transaction as `ctx.tx`.
 */
export function withDrizzle<TSchema extends Record<string, unknown>, R = unknown>(
  schema: TSchema,
  handler: BoundHandler<DrizzleTx<TSchema>, R>,
): InboxBinding<R> {
  checkBoundHandler('withDrizzle', handler);
  return {
    handler: (envelope, ctx) =>
      drizzleOn(ctx.tx, schema).transaction((tx) =>
        Promise.resolve(handler(envelope, boundContext(ctx, tx))),
      ),
  };
}
