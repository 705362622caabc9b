/**
 * `@once/core/knex`: a Knex handler processed effectively once. Knex cannot run on a connection it
 * did not check out itself, so Knex opens the transaction (`knex.transaction(fn)`); once claims the
 * message inside it through `trx.raw`, hands your handler the Knex transaction as `ctx.tx`, and
 * settles the broker only after Knex's COMMIT resolved.
 *
 * ```ts
 * const inbox = createInbox({ pool, consumer: 'billing.orders',
 *   ...withKnex(knex, async (message, { tx }) => { await tx('charges').insert({ ... }) }) });
 * ```
 */
import type { Knex } from 'knex';
import { ErrorCode, OnceError } from '../errors.js';
import type { BoundHandler, InboxBinding } from '../handler/binding.js';
import { ownedBinding } from '../handler/binding.js';
import type { CallerTransactions } from '../pg/caller-transactions.js';

export type { BoundContext, BoundHandler, InboxBinding } from '../handler/binding.js';

/** Options of {@link withKnex}. */
export interface WithKnexOptions {
  /** The isolation level Knex opens the message's transaction with. @default the database's */
  isolationLevel?: Knex.IsolationLevels | undefined;
}

/**
 * `$1`-style SQL as Knex's raw call takes it: each `$n` becomes `?` with its value, in order of
 * appearance (a `$n` used twice is bound twice), and a `?` already in the text (jsonb's operators)
 * is escaped so Knex leaves it alone. `$n` inside a quoted literal is not told apart: once's own
 * statements have none.
 */
export function knexRaw(
  text: string,
  values: readonly unknown[],
): {
  /** The statement with each `$n` turned into Knex's `?` and each literal `?` escaped. */
  sql: string;
  /** The values in the order of the `?` placeholders (a `$n` used twice appears twice). */
  bindings: unknown[];
} {
  const bindings: unknown[] = [];
  const sql = text.replace(/\?|\$(\d+)/g, (match, n: string | undefined) => {
    if (n === undefined) return '\\?';
    const i = Number(n) - 1;
    if (i < 0 || i >= values.length) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        `withKnex: ${match} has no value (${values.length} given)`,
      );
    }
    bindings.push(values[i]);
    return '?';
  });
  return { sql, bindings };
}

/**
 * Binds a Knex handler: returns the inbox's `handler` and `transactions`, to spread into
 * `createInbox` or an adapter's options. The handler receives the `Knex.Transaction` as `ctx.tx`.
 * Knex has no transaction timeout: at once's deadline the body rejects, Knex rolls back, and a
 * later query through `tx` fails.
 */
export function withKnex<R = unknown>(
  knex: Pick<Knex, 'transaction'>,
  handler: BoundHandler<Knex.Transaction, R>,
  options: WithKnexOptions = {},
): InboxBinding<R> & {
  /** Always set: the inbox claims inside the library's transactions. */
  mode: {
    /** How the inbox opens, runs statements in and commits the library's transactions. */
    transactions: CallerTransactions<Knex.Transaction>;
  };
} {
  if (typeof knex?.transaction !== 'function') {
    throw new OnceError(ErrorCode.InvalidOption, 'withKnex: knex must be a Knex instance');
  }
  const config = options.isolationLevel ? { isolationLevel: options.isolationLevel } : undefined;
  const transactions: CallerTransactions<Knex.Transaction> = {
    run: (body) => knex.transaction((trx) => body(trx), config),
    query: async (trx, text, values) => {
      const { sql, bindings } = knexRaw(text, values);
      const res = (await trx.raw(sql, bindings as Knex.RawBinding[])) as {
        rows?: Record<string, unknown>[];
        rowCount?: number | null;
        command?: string;
      };
      const rows = res.rows ?? [];
      return {
        rows,
        rowCount: res.rowCount ?? rows.length,
        ...(res.command ? { command: res.command } : {}),
      };
    },
  };
  return ownedBinding('withKnex', handler, transactions);
}
