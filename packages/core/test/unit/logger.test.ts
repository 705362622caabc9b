import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import { silentLogger } from '../../src/adapter/index.js';
import { resolveInboxOptions } from '../../src/engine/options.js';
import type { InboxOptions, Logger } from '../../src/index.js';
import { consoleFailureLogger } from '../../src/logger.js';

/** The shape of pino's (and bunyan's) log methods, reduced: fields object first, message second. */
interface PinoLike {
  debug(obj: object, msg?: string, ...args: unknown[]): void;
  info(obj: object, msg?: string, ...args: unknown[]): void;
  warn(obj: object, msg?: string, ...args: unknown[]): void;
  error(obj: object, msg?: string, ...args: unknown[]): void;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('Logger', () => {
  it('a pino-shaped logger and console are Loggers (type-checked)', () => {
    expectTypeOf<PinoLike>().toMatchTypeOf<Logger>();
    expectTypeOf<Console>().toMatchTypeOf<Logger>();
    expectTypeOf<false>().toMatchTypeOf<NonNullable<InboxOptions['logger']>>();
  });

  const pool = { query: async () => ({ rows: [] }), connect: async () => ({}) };
  const base = { pool, consumer: 'c', handler: async () => {} };

  it('no logger: silent, failure lines to console; false: both silent; a logger: both to it', () => {
    const none = resolveInboxOptions(base as unknown as InboxOptions);
    expect(none.logger).toBe(silentLogger);
    expect(none.failureLogger).toBe(consoleFailureLogger);
    const off = resolveInboxOptions({ ...base, logger: false } as unknown as InboxOptions);
    expect([off.logger, off.failureLogger]).toEqual([silentLogger, silentLogger]);
    const mine: Logger = { ...silentLogger };
    const given = resolveInboxOptions({ ...base, logger: mine } as unknown as InboxOptions);
    expect([given.logger, given.failureLogger]).toEqual([mine, mine]);
  });

  it('a logger without a method is refused', () => {
    expect(() => resolveInboxOptions({ ...base, logger: { warn() {} } } as unknown as InboxOptions)).toThrow(
      /option 'logger' must be false or have a debug\(\) method/,
    );
  });

  it('the console failure line is one line: message, then key=value', () => {
    const spy = vi.spyOn(console, 'warn').mockImplementation(() => {});
    consoleFailureLogger.warn({ id: 'a b', reason: 'conflict', n: 2, gone: undefined }, 'once: x');
    expect(spy.mock.calls).toEqual([['once: x id=a b reason=conflict n=2']]);
  });
});
