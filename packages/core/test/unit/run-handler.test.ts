import { describe, expect, it } from 'vitest';
import { DeadlineError } from '../../src/errors.js';
import type { HandlerContext } from '../../src/handler/handler.js';
import { runHandler } from '../../src/handler/run-handler.js';
import type { Envelope } from '../../src/message/envelope.js';
import type { PgClientLike } from '../../src/pg/pg-like.js';

const client = { query: () => Promise.resolve({ rows: [], rowCount: 0 }) } as unknown as PgClientLike;
const envelope: Envelope = {
  id: 'm1',
  body: Buffer.from('x'),
  headers: {},
  source: { broker: 'test', queue: 'q' },
  attempt: 1,
  redelivered: false,
};
const spec = (handler: (e: Envelope, ctx: HandlerContext) => unknown, timeoutMs = 1000) => ({
  handler: handler as never,
  client,
  id: 'm1',
  consumer: 'c',
  timeoutMs,
  storeResult: true,
  outbox: undefined,
});

// What a handler sees of ctx: its functions and `signal` are own, enumerable properties (handlers
// destructure and spread it), in the order the literal always had.
describe('runHandler ctx', () => {
  it('is a plain object with own properties, signal an own enumerable accessor', async () => {
    let seen: HandlerContext | undefined;
    const run = await runHandler(
      spec((_e, ctx) => {
        seen = ctx;
        return 1;
      }),
      envelope,
    );
    expect(run).toEqual({ ok: true, result: 1, json: '1', published: false });
    const ctx = seen!;
    expect(Object.getPrototypeOf(ctx)).toBe(Object.prototype);
    expect(Reflect.ownKeys(ctx)).toEqual([
      'tx',
      'id',
      'consumer',
      'attempt',
      'publish',
      'signal',
      'step',
      'idempotencyKey',
    ]);
    const d = Object.getOwnPropertyDescriptor(ctx, 'signal')!;
    expect(typeof d.get).toBe('function');
    expect(d.enumerable).toBe(true);
    expect(d.configurable).toBe(true);
    for (const k of ['publish', 'step', 'idempotencyKey'] as const) {
      expect(Object.getOwnPropertyDescriptor(ctx, k)?.enumerable).toBe(true);
    }
  });

  it('gives one signal per message, through spreads, destructuring, proxies and a replaced tx', async () => {
    const signals: AbortSignal[] = [];
    await runHandler(
      spec((_e, ctx) => {
        const { signal } = ctx;
        signals.push(
          signal,
          ctx.signal,
          { ...ctx }.signal,
          new Proxy(ctx, {}).signal,
          Object.create(ctx).signal,
        );
        ctx.tx = { query: ctx.tx.query.bind(ctx.tx) } as HandlerContext['tx'];
        signals.push(ctx.signal);
      }),
      envelope,
    );
    expect(signals.every((s) => s === signals[0] && s instanceof AbortSignal && !s.aborted)).toBe(true);
    const other: AbortSignal[] = [];
    await runHandler(
      spec((_e, ctx) => {
        other.push(ctx.signal);
      }),
      envelope,
    );
    expect(other[0]).not.toBe(signals[0]);
  });

  it('aborts the signal at the deadline, read before or after it passed, and revokes tx', async () => {
    let early: AbortSignal | undefined;
    let ctxSeen: HandlerContext | undefined;
    const run = await runHandler(
      spec((_e, ctx) => {
        early = ctx.signal;
        ctxSeen = ctx;
        return new Promise(() => {});
      }, 20),
      envelope,
    );
    expect(run.ok).toBe(false);
    expect(!run.ok && run.error).toBeInstanceOf(DeadlineError);
    expect(early?.aborted).toBe(true);
    expect(early?.reason).toBe(!run.ok && run.error);
    let late: HandlerContext | undefined;
    const run2 = await runHandler(
      spec((_e, ctx) => {
        late = ctx;
        return new Promise(() => {});
      }, 20),
      envelope,
    );
    expect(late!.signal.aborted).toBe(true);
    expect(late!.signal.reason).toBe(!run2.ok && run2.error);
    await expect(ctxSeen!.tx.query('SELECT 1')).rejects.toMatchObject({ code: 'TX_REVOKED' });
  });

  it('reports a throw, a rejection and publish without an outbox as before', async () => {
    const boom = new Error('boom');
    expect(
      await runHandler(
        spec(() => {
          throw boom;
        }),
        envelope,
      ),
    ).toEqual({ ok: false, error: boom });
    expect(
      await runHandler(
        spec(() => Promise.reject(boom)),
        envelope,
      ),
    ).toEqual({ ok: false, error: boom });
    const run = await runHandler(
      spec((_e, { publish }) => publish('d', 'b')),
      envelope,
    );
    expect(!run.ok && (run.error as { code?: string }).code).toBe('INVALID_OPTION');
  });
});
