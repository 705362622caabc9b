import { type Envelope, ErrorCode, type Logger, OnceError } from '@once/core';
import type { UnclaimedTx } from '@once/core/adapter';
import type { ResolvedIdempotencyOptions } from './options.js';
import { HttpProblem, problemResponse } from './problem.js';
import { checkResponse, isStorable } from './response.js';
import type { HandleResult, IdempotentContext, IdempotentRequest, RunHandler } from './types.js';

const EMPTY = Buffer.alloc(0);

/**
 * A request without a key on a route that does not require one: the handler runs in once's
 * transaction without a claim ({@link UnclaimedTx}: synchronous_commit and the lock timeout
 * pinned, the handler's deadline, a `ctx.tx` revoked when it settles). A 2xx or 3xx commits its
 * writes and outbox rows, and is sent only once COMMIT committed; a 4xx or 5xx rolls them back
 * and is sent as it is. Nothing is recorded, so a retry runs it again. `ctx.step` throws: there
 * is no key to record steps under.
 */
export async function runUnkeyed(
  unclaimed: UnclaimedTx,
  o: ResolvedIdempotencyOptions,
  request: IdempotentRequest,
  scope: string,
  run: RunHandler,
  log: Logger | undefined,
): Promise<HandleResult> {
  const noKey = () => {
    throw new OnceError(
      ErrorCode.InvalidOption,
      'ctx.step and ctx.idempotencyKey need an Idempotency-Key on the request',
    );
  };
  const envelope: Envelope = {
    body: EMPTY,
    headers: {},
    source: { broker: 'http', queue: request.route ?? (request.target.split('?')[0] as string) },
    attempt: 1,
    redelivered: false,
  };
  const ended = await unclaimed.run(
    async (_envelope, ctx) => {
      const hctx: IdempotentContext = {
        tx: ctx.tx,
        publish: ctx.publish,
        step: noKey,
        idempotencyKey: noKey,
        key: '',
        scope,
        attempt: 1,
        // Read through: core makes the AbortController only when the handler asks for it.
        get signal() {
          return ctx.signal;
        },
      };
      const answered = await run(hctx);
      const bad = checkResponse(answered);
      if (bad) throw new TypeError(bad);
      return answered;
    },
    envelope,
    (answered) => answered.status < 400,
  );
  switch (ended.status) {
    case 'committed':
      return { status: 'unkeyed', response: ended.result };
    case 'rolled-back':
      return { status: isStorable(ended.result.status) ? 'unkeyed' : 'not-stored', response: ended.result };
    case 'not-run':
      return {
        status: 'failed',
        error: ended.error,
        response: problemResponse(
          503,
          HttpProblem.Unavailable,
          'the database cannot be reached; retry later',
          [['retry-after', '1']],
        ),
      };
    case 'failed':
      log?.warn(
        { consumer: o.consumer, err: ended.error },
        ended.inDoubt
          ? 'request without an Idempotency-Key failed at COMMIT; whether its writes committed is unknown'
          : 'request without an Idempotency-Key failed; its writes rolled back',
      );
      return {
        status: 'failed',
        error: ended.error,
        response: problemResponse(
          500,
          HttpProblem.HandlerFailed,
          ended.inDoubt
            ? 'the connection to the database was lost at COMMIT: the request may or may not have taken effect'
            : 'the request failed and its writes rolled back',
        ),
      };
  }
}
