import {
  AttemptsExhaustedError,
  type Envelope,
  type Handler,
  type Inbox,
  type Logger,
  serializeError,
} from '@once/core';

/** What {@link startGuard} needs. */
export interface StartGuardSpec<R> {
  /** The user's handler. */
  handler: Handler<R>;
  /** Redelivered messages the chains run alone: the ones whose starts are counted. */
  alone: WeakSet<Envelope>;
  maxAttempts: number;
  /** The inbox that runs the guard (made after it, hence a getter). */
  inbox: () => Inbox<R>;
  logger: Logger;
  /** Longest wait for the count, in ms; past it the handler runs uncounted. */
  waitMs: number;
}

/**
 * The handler the inbox runs. For a redelivered message running alone, it counts a start in
 * Postgres (committed on its own) just before the user's handler, and refuses a message started
 * more than `maxAttempts` times: the one that keeps killing the process. Counting here, once the
 * inbox has claimed the id, means only a start that reaches the handler counts: a redelivery that
 * ends `busy` (another worker holds the id), `duplicate`, or not run at all spends nothing.
 *
 * In transactional mode the count needs a second pool connection beside the handler's
 * transaction (a redelivered message runs alone, so one more): with a pool of one it would wait
 * forever, so the wait is bounded and the handler then runs uncounted, with a warning.
 */
export function startGuard<R>(spec: StartGuardSpec<R>): Handler<R> {
  const { handler, alone, maxAttempts, logger } = spec;
  return async (envelope, ctx) => {
    if (alone.has(envelope)) {
      const starts = await count(spec, envelope);
      if (starts !== undefined && starts > maxAttempts) throw new AttemptsExhaustedError(starts, maxAttempts);
    }
    return handler(envelope, ctx);
  };

  /** The start count, or undefined (best effort: the database refused, or the wait ran out). */
  async function count(s: StartGuardSpec<R>, envelope: Envelope): Promise<number | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => {
        logger.warn(
          'once/sqs: could not count a start in time (is the pool smaller than 2?); running uncounted',
          {
            waitMs: s.waitMs,
          },
        );
        resolve(undefined);
      }, s.waitMs);
    });
    try {
      return await Promise.race([s.inbox().noteStart(envelope), late]);
    } catch (err) {
      logger.debug('once/sqs: could not count a start', { error: serializeError(err).message });
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}
