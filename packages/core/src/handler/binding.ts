import { ErrorCode, OnceError } from '../errors.js';
import type { Envelope } from '../message/envelope.js';
import type { CallerTransactions } from '../pg/caller-transactions.js';
import type { Handler, HandlerContext } from './handler.js';

/** A handler's context whose `tx` is a data library's transaction object (`@once/core/prisma`, ...). */
export type BoundContext<T> = Omit<HandlerContext, 'tx' | 'transaction'> & {
  /** The data library's transaction object, which the message's claim commits with. */
  readonly tx: T;
};

/** A handler that receives a data library's transaction object as `ctx.tx`. */
export type BoundHandler<T, R = unknown> = (envelope: Envelope, ctx: BoundContext<T>) => Promise<R> | R;

/**
 * What a binding returns: the inbox's `handler`, and for a library that owns its transactions,
 * the `mode` that claims inside them (`{ transactions }`). Spread it into `createInbox` or an
 * adapter's options.
 */
export interface InboxBinding<R = unknown> {
  /** The inbox's handler: yours, called with the library's transaction object as `ctx.tx`. */
  handler: Handler<R>;
  /** Set by bindings of libraries that open their own transactions: the inbox's `mode: { transactions }`. */
  mode?: {
    /** How the inbox opens, runs statements in and commits the library's transactions. */
    transactions: CallerTransactions;
  };
}

/** `ctx` with `tx` replaced; its other members (the lazy `signal`) stay as they are. */
export function boundContext<T>(ctx: HandlerContext, tx: T): BoundContext<T> {
  return Object.create(ctx, { tx: { value: tx, enumerable: true } }) as BoundContext<T>;
}

/** Refuses a handler that is not a function, naming the binding (`withPrisma`, ...). */
export function checkBoundHandler(binding: string, handler: unknown): void {
  if (typeof handler !== 'function') {
    throw new OnceError(ErrorCode.InvalidOption, `${binding}: option 'handler' must be a function`);
  }
}

/**
 * The binding of a library that owns its transactions: once claims inside `transactions.run`, and
 * the handler gets the library's transaction object (`ctx.transaction`) as its `tx`.
 */
export function ownedBinding<T, R>(
  binding: string,
  handler: BoundHandler<T, R>,
  transactions: CallerTransactions<T>,
): InboxBinding<R> & { mode: { transactions: CallerTransactions<T> } } {
  checkBoundHandler(binding, handler);
  return {
    handler: (envelope, ctx) => handler(envelope, boundContext(ctx, ctx.transaction as T)),
    // The inbox calls it with the objects its own `run` made: T on both sides.
    mode: { transactions: transactions as CallerTransactions<T> & CallerTransactions },
  };
}
