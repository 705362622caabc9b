import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FailureLog, type HandlerFailure } from '../../src/engine/failure-log.js';
import type { Logger } from '../../src/logger.js';

/** A pino-shaped logger that keeps its lines. */
function recorder(): Logger & { lines: { level: string; fields: Record<string, unknown>; msg: string }[] } {
  const lines: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  const at = (level: string) => (fields: Record<string, unknown>, msg: string) =>
    void lines.push({ level, fields, msg });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

const failure = (over: Partial<HandlerFailure> = {}): HandlerFailure => ({
  id: 'm-1',
  attempt: 1,
  maxAttempts: 5,
  error: { name: 'error', message: 'column "amout" does not exist', code: '42703' },
  next: 'retry in 200 ms',
  ...over,
});

describe('FailureLog', () => {
  it('a failed run logs at warn with consumer, id, attempt of max, error, code and what happens next', () => {
    const logger = recorder();
    const log = new FailureLog({ logger, consumer: 'billing', prefix: 'once/kafka', now: () => 0 });
    log.handlerFailed(failure({ where: { topic: 'orders', partition: 2, offset: '41' } }));
    expect(logger.lines).toEqual([
      {
        level: 'warn',
        msg: 'once/kafka: handler failed',
        fields: {
          consumer: 'billing',
          id: 'm-1',
          attempt: '1 of 5',
          error: 'column "amout" does not exist',
          code: '42703',
          next: 'retry in 200 ms',
          topic: 'orders',
          partition: 2,
          offset: '41',
        },
      },
    ]);
  });

  it('the same error of the same message logs at most once a minute, the next line with the count left out', () => {
    let t = 0;
    const logger = recorder();
    const log = new FailureLog({ logger, consumer: 'c', prefix: 'once', now: () => t });
    for (let attempt = 1; attempt <= 4; attempt++) {
      log.handlerFailed(failure({ attempt }));
      t += 10_000;
    }
    expect(logger.lines).toHaveLength(1);
    t = 60_000;
    log.handlerFailed(failure({ attempt: 7 }));
    expect(logger.lines).toHaveLength(2);
    expect(logger.lines[1]?.fields).toMatchObject({ attempt: '7 of 5', repeated: 3 });
    // Another message, or another error of the same one, is not a repeat.
    log.handlerFailed(failure({ id: 'm-2' }));
    log.handlerFailed(failure({ error: { name: 'error', message: 'other' } }));
    expect(logger.lines).toHaveLength(4);
  });

  it('an outage logs once per episode however many messages it holds, and once when it ends', () => {
    let t = 1_000;
    const logger = recorder();
    const log = new FailureLog({ logger, consumer: 'c', prefix: 'once/sqs', now: () => t });
    const down = { name: 'error', message: 'connect ECONNREFUSED 127.0.0.1:5432', code: 'ECONNREFUSED' };
    for (let i = 0; i < 500; i++) log.unavailable(down);
    expect(logger.lines).toHaveLength(1);
    expect(logger.lines[0]).toMatchObject({ level: 'warn', fields: { consumer: 'c', code: 'ECONNREFUSED' } });
    t = 31_000;
    log.available();
    log.available();
    expect(logger.lines).toHaveLength(2);
    expect(logger.lines[1]?.fields).toMatchObject({ afterMs: 30_000, held: 500 });
    log.unavailable(down);
    expect(logger.lines).toHaveLength(3);
  });

  it('tracks at most maxTracked messages (a storm of distinct failures cannot grow memory without bound)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 0, max: 90_000 })), {
          maxLength: 300,
        }),
        (events) => {
          let t = 0;
          const logger = recorder();
          const log = new FailureLog({ logger, consumer: 'c', prefix: 'once', now: () => t, maxTracked: 8 });
          // An independent reference: per key, the time of its last logged line.
          const last = new Map<number, number>();
          let expected = 0;
          for (const [id, step] of events) {
            t += step;
            const before = last.get(id);
            // The reference forgets nothing, so it may only log less often than the real one
            // when the real one had to forget a key: count the real lines and compare bounds.
            if (before === undefined || t - before >= 60_000) {
              last.set(id, t);
              expected++;
            }
            log.handlerFailed(failure({ id: `m-${id}` }));
          }
          // At least what the never-forgetting reference logs; at most one line per event.
          expect(logger.lines.length).toBeGreaterThanOrEqual(expected);
          expect(logger.lines.length).toBeLessThanOrEqual(events.length);
        },
      ),
    );
  });

  it('with room for every key, it logs exactly what the never-forgetting reference logs', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 90_000 })), {
          maxLength: 200,
        }),
        (events) => {
          let t = 0;
          const logger = recorder();
          const log = new FailureLog({ logger, consumer: 'c', prefix: 'once', now: () => t });
          const last = new Map<number, number>();
          let expected = 0;
          for (const [id, step] of events) {
            t += step;
            const before = last.get(id);
            if (before === undefined || t - before >= 60_000) {
              last.set(id, t);
              expected++;
            }
            log.handlerFailed(failure({ id: `m-${id}` }));
          }
          expect(logger.lines.length).toBe(expected);
        },
      ),
    );
  });
});
