import { ErrorCode, type Logger, OnceError, type Tx } from '@once/core';
import { inTransaction } from '@once/core/adapter';
import type { ResolvedIdempotencyOptions } from './options.js';
import { HttpProblem, problemResponse } from './problem.js';
import { checkResponse, isStorable } from './response.js';
import type {
  HandleResult,
  HttpResponseData,
  IdempotentContext,
  IdempotentRequest,
  RunHandler,
} from './types.js';

class NotCommitted extends Error {}

/**
 * A request without a key on a route that does not require one: the handler runs in a plain
 * transaction (its writes and outbox rows commit together, the response is sent after COMMIT),
 * but nothing is recorded, so a retry runs it again. `ctx.step` throws: there is no key to record
 * steps under.
 */
export async function runUnkeyed(
  o: ResolvedIdempotencyOptions,
  _request: IdempotentRequest,
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
  let answered: HttpResponseData | undefined;
  let published = false;
  try {
    await inTransaction(o.pool, async (client) => {
      const ctx: IdempotentContext = {
        tx: client as unknown as Tx,
        publish: async (destination, body, options) => {
          if (!o.outbox) throw new OnceError(ErrorCode.InvalidOption, 'ctx.publish needs the outbox option');
          published = true;
          return o.outbox.enqueue(client, destination, body, options);
        },
        step: noKey,
        idempotencyKey: noKey,
        key: '',
        scope,
        attempt: 1,
        signal: new AbortController().signal,
      };
      answered = await run(ctx);
      const bad = checkResponse(answered);
      if (bad) throw new TypeError(bad);
      if (answered.status >= 400) throw new NotCommitted();
    });
  } catch (err) {
    if (err instanceof NotCommitted && answered) {
      return { status: isStorable(answered.status) ? 'unkeyed' : 'not-stored', response: answered };
    }
    log?.warn(
      { consumer: o.consumer, err },
      'request without an Idempotency-Key failed; its writes rolled back',
    );
    return {
      status: 'failed',
      error: err,
      response: problemResponse(
        500,
        HttpProblem.HandlerFailed,
        'the request failed and its writes rolled back',
      ),
    };
  }
  if (published) o.outbox?.wake();
  return { status: 'unkeyed', response: answered! };
}
