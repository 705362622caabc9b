import fc from 'fast-check';
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

  it('the console failure line holds no control character, whatever a producer put in an id or an error', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    const control = fc.integer({ min: 0, max: 0x9f }).filter((c) => c < 0x20 || c >= 0x7f);
    const text = fc
      .array(
        fc.oneof(
          control.map((c) => String.fromCodePoint(c)),
          fc.string({ maxLength: 3 }),
        ),
        { maxLength: 8 },
      )
      .map((parts) => parts.join(''));
    // The test's own reference: code point by code point, JSON.stringify's escapes for C0, \u00XX for DEL and C1.
    const reference = (s: string) =>
      [...s]
        .map((ch) => {
          const c = ch.codePointAt(0) ?? 0;
          if (c < 0x20) return JSON.stringify(ch).slice(1, -1);
          return c >= 0x7f && c <= 0x9f ? `\\u00${c.toString(16)}` : ch;
        })
        .join('');
    fc.assert(
      fc.property(text, text, (id, message) => {
        warn.mockClear();
        error.mockClear();
        consoleFailureLogger.warn({ id, error: message, where: { queue: id } }, 'once: handler failed');
        consoleFailureLogger.error({ id }, `once: ${message}`);
        const [[w], [e]] = [warn.mock.calls[0] ?? [], error.mock.calls[0] ?? []];
        expect(w).toBe(
          `once: handler failed id=${reference(id)} error=${reference(message)} where=${reference(JSON.stringify({ queue: id }))}`,
        );
        expect(e).toBe(`once: ${reference(message)} id=${reference(id)}`);
      }),
      { numRuns: 1000 },
    );
    warn.mockClear();
    consoleFailureLogger.warn(
      { id: 'm-1\nonce: message dead-lettered id=forged', code: '\u001b[2K\u009b1A' },
      'once: x',
    );
    expect(warn.mock.calls).toEqual([
      ['once: x id=m-1\\nonce: message dead-lettered id=forged code=\\u001b[2K\\u009b1A'],
    ]);
  });
});
