/**
 * `@once/core/prisma`: a Prisma handler processed effectively once. Prisma opens the interactive
 * transaction (`prisma.$transaction(fn)`); once claims the message inside it through
 * `$queryRawUnsafe`, hands your handler Prisma's transaction client as `ctx.tx`, and settles the
 * broker only after Prisma's COMMIT resolved. Works with the Rust-free client (`prisma-client`
 * generator with `@prisma/adapter-pg`) and any client with interactive transactions.
 *
 * ```ts
 * const inbox = createInbox({ pool, consumer: 'billing.orders',
 *   ...withPrisma(prisma, async (message, { tx }) => { await tx.charge.create({ data: { ... } }) }) });
 * ```
 */

import { ErrorCode, OnceError } from '../errors.js';
import type { BoundHandler, InboxBinding } from '../handler/binding.js';
import { ownedBinding } from '../handler/binding.js';
import type { CallerTransactions } from '../pg/caller-transactions.js';

export type { BoundContext, BoundHandler, InboxBinding } from '../handler/binding.js';

/** What the binding uses of a Prisma client: interactive transactions. */
export interface PrismaClientLike {
  /** The interactive form: `fn` runs in a transaction, committed when it resolves. */
  $transaction<X>(
    fn: (tx: PrismaTransactionLike) => Promise<X>,
    options?: {
      /**
       * How long Prisma waits for a connection to start the transaction, in ms; Prisma's default (2000) when
       * absent.
       */
      maxWait?: number;
      /**
       * How long the transaction may run before Prisma closes it, in ms: once passes the handler's deadline
       * plus `timeoutMarginMs`.
       */
      timeout?: number;
      /** Not passed: Prisma's isolation level is left at the database's default. */
      isolationLevel?: never;
    },
  ): Promise<X>;
}

/** What the binding uses of Prisma's transaction client: its raw-SQL call. */
export interface PrismaTransactionLike {
  /** Runs SQL with `$1`-style parameters; resolves with the rows. */
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
}

/**
 * The transaction client type of a Prisma client type: the argument of the callback of
 * `$transaction`'s interactive form (its last overload), that is `Prisma.TransactionClient`.
 */
export type PrismaTransactionOf<C> = C extends {
  // biome-ignore lint/suspicious/noExplicitAny: any function, to pick the callback out of the overload
  $transaction: (...args: any[]) => any;
}
  ? // biome-ignore lint/suspicious/noExplicitAny: as above
    Parameters<Extract<Parameters<C['$transaction']>[0], (...args: any[]) => any>>[0]
  : never;

/** The isolation levels of Prisma's PostgreSQL transactions. */
export type PrismaIsolationLevel = 'ReadCommitted' | 'RepeatableRead' | 'Serializable';

/** Options of {@link withPrisma}. */
export interface WithPrismaOptions {
  /** Prisma's `isolationLevel` for the message's transaction. @default Prisma's (the database's) */
  isolationLevel?: PrismaIsolationLevel | undefined;
  /** Prisma's `maxWait`: how long to wait for a connection, in ms. @default Prisma's (2000) */
  maxWait?: number | undefined;
  /**
   * Prisma's `timeout` is once's `handlerTimeoutMs` plus this margin, in ms: once ends the
   * transaction at its deadline (the handler's later queries fail), and Prisma closes it itself
   * shortly after, should once's rollback not get through. @default 1000
   */
  timeoutMarginMs?: number | undefined;
}

/**
 * Binds a Prisma handler: returns the inbox's `handler` and `transactions`, to spread into
 * `createInbox` or an adapter's options. The handler receives Prisma's transaction client
 * (`Prisma.TransactionClient`) as `ctx.tx`; every write through it commits with the message's claim.
 */
export function withPrisma<C extends object, R = unknown>(
  prisma: C,
  handler: BoundHandler<PrismaTransactionOf<C>, R>,
  options: WithPrismaOptions = {},
): InboxBinding<R> & {
  /** Always set: the inbox claims inside Prisma's transactions. */
  mode: {
    /** How the inbox opens, runs statements in and commits the library's transactions. */
    transactions: CallerTransactions<PrismaTransactionOf<C>>;
  };
} {
  const client = prisma as unknown as PrismaClientLike;
  if (typeof client?.$transaction !== 'function') {
    throw new OnceError(
      ErrorCode.InvalidOption,
      'withPrisma: prisma must be a Prisma client (it has no $transaction)',
    );
  }
  const margin = options.timeoutMarginMs ?? 1000;
  const transactions: CallerTransactions<PrismaTransactionOf<C>> = {
    run: (body, { timeoutMs }) =>
      client.$transaction((tx) => body(tx as PrismaTransactionOf<C>), {
        timeout: timeoutMs + margin,
        ...(options.maxWait !== undefined ? { maxWait: options.maxWait } : {}),
        ...(options.isolationLevel !== undefined ? { isolationLevel: options.isolationLevel as never } : {}),
      }),
    query: async (tx, text, values) => {
      const rows = await (tx as unknown as PrismaTransactionLike).$queryRawUnsafe<Record<string, unknown>[]>(
        text,
        ...values,
      );
      return { rows, rowCount: rows.length };
    },
    sqlstate: prismaSqlstate,
  };
  return ownedBinding('withPrisma', handler, transactions);
}

/**
 * The SQLSTATE behind a Prisma error: a raw query's failure (P2010) carries it in its message, a
 * driver-adapter error in `meta.driverAdapterError.cause.originalCode`; P2034 is Prisma's name for
 * a write conflict or deadlock (run again).
 */
export function prismaSqlstate(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as {
    code?: unknown;
    message?: unknown;
    meta?: { driverAdapterError?: { cause?: { originalCode?: unknown } } };
  };
  const original = e.meta?.driverAdapterError?.cause?.originalCode;
  if (typeof original === 'string' && /^[0-9A-Z]{5}$/.test(original)) return original;
  if (e.code === 'P2034') return '40001';
  if (e.code === 'P2010' && typeof e.message === 'string') {
    return /Code: `([0-9A-Z]{5})`/.exec(e.message)?.[1];
  }
  return undefined;
}
