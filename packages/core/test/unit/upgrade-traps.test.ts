import { describe, expect, it } from 'vitest';
import { splitOptions } from '../../src/adapter/split-options.js';
import { createInbox, type Logger } from '../../src/index.js';
import { firstParameterOf, resolveLoggers, silentLogger } from '../../src/logger.js';
import { checkEventName, ONCE_EVENT_NAMES, TypedEmitter } from '../../src/message/events.js';

// Three breaks of an earlier 0.x were silent in JavaScript: a listener on a retired event name
// never fired, a logger in the old (message, fields) order printed objects as messages, and a
// renamed option got "is not an option" with no pointer to its new name. Each now speaks.

const pool = { query: async () => ({ rows: [] }), connect: async () => ({}) };

describe('on() refuses a name it never emits', () => {
  it('the inbox: UNKNOWN_EVENT naming the name, the owner and the events it has', () => {
    const inbox = createInbox({ pool: pool as never, consumer: 'c', handler: () => {}, logger: false });
    expect(() => inbox.on('message:processd' as never, () => {})).toThrow(
      expect.objectContaining({
        code: 'UNKNOWN_EVENT',
        message: expect.stringContaining("'message:processd'"),
      }),
    );
    expect(() => inbox.on('message:dead-lettered' as never, () => {})).toThrow(
      /not an event of Inbox; use consumer\.on\('message:dead-lettered'\)/,
    );
    expect(() => inbox.on('message:processed', () => {})).not.toThrow();
  });

  it("SQS's retired 'dead-letter' and 'dead-letter:failed' say what replaced them", () => {
    const names = { 'message:dead-lettered': true, error: true };
    expect(() => checkEventName('SqsConsumer', names, 'dead-letter')).toThrow(
      "SqsConsumer.on: 'dead-letter' is not an event of SqsConsumer; use 'message:dead-lettered' on the consumer",
    );
    expect(() => checkEventName('SqsConsumer', names, 'dead-letter:failed')).toThrow(
      /'error' on the consumer/,
    );
    expect(() => checkEventName('SqsConsumer', names, 'error')).not.toThrow();
  });

  it('a name from Object.prototype is not an event', () => {
    for (const name of ['toString', 'constructor', '__proto__', 'hasOwnProperty']) {
      expect(() => checkEventName('Inbox', ONCE_EVENT_NAMES, name)).toThrow(/UNKNOWN_EVENT|not an event/);
    }
  });

  it('an emitter without a name list (a test double) accepts any name, as before', () => {
    const e = new TypedEmitter<{ a: number }>(silentLogger);
    expect(() => e.on('b' as never, () => {})).not.toThrow();
  });
});

describe('a logger in the old (message, fields) order gets one warning', () => {
  it('message-first methods: one warning, written in the order the logger expects', () => {
    const seen: unknown[][] = [];
    const old = {
      debug: (msg: unknown, fields?: unknown) => void [msg, fields],
      info(message: unknown, fields?: unknown) {
        void [message, fields];
      },
      warn: (text: unknown, fields?: unknown) => {
        seen.push([text, fields]);
      },
      error: async (msg: unknown) => void msg,
    } as unknown as Logger;
    resolveLoggers(old);
    resolveLoggers(old); // once per logger
    expect(seen).toHaveLength(1);
    expect(seen[0]?.[0]).toMatch(/takes the message first; once calls logger\.warn\(fields, message\)/);
    expect(seen[0]?.[1]).toEqual({ levels: ['debug', 'info', 'warn', 'error'] });
  });

  it('only debug message-first: the warning goes to warn in the documented order', () => {
    const seen: unknown[][] = [];
    const mixed = {
      debug: (msg: unknown) => void msg,
      info: () => {},
      warn: (fields: unknown, message: unknown) => seen.push([fields, message]),
      error: () => {},
    } as unknown as Logger;
    resolveLoggers(mixed);
    expect(seen).toEqual([
      [{ levels: ['debug'] }, expect.stringMatching(/logger's debug method takes the message first/)],
    ]);
  });

  it('fields-first loggers (pino-shaped, console, one-letter parameters) get none', () => {
    const seen: unknown[] = [];
    const pinoLike: Logger = {
      debug: (obj: object, msg?: string) => void [obj, msg],
      info: (fields: object) => void fields,
      warn: (o: object, ...n: unknown[]) => seen.push([o, n]),
      error: () => {},
    };
    resolveLoggers(pinoLike);
    expect(seen).toEqual([]);
    expect(firstParameterOf(console.warn)).toBeUndefined();
    expect(firstParameterOf(silentLogger.warn)).toBeUndefined();
  });

  it('reads the first parameter of every function form', () => {
    expect(firstParameterOf((msg: string) => msg)).toBe('msg');
    expect(firstParameterOf(async (message: string) => message)).toBe('message');
    expect(
      firstParameterOf(function named(text: string) {
        return text;
      }),
    ).toBe('text');
    expect(
      firstParameterOf(
        {
          m(fields: object) {
            return fields;
          },
        }.m,
      ),
    ).toBe('fields');
    expect(firstParameterOf(() => 1)).toBeUndefined();
  });
});

describe('a retired option names what replaced it', () => {
  const base = { pool, handler: () => {} };
  const split = (factory: string, extra: Record<string, unknown>) => () =>
    splitOptions<Record<string, unknown>, string>(
      { ...base, ...extra },
      { factory, adapterKeys: ['groupId', 'batch', 'idHeader'] },
    );

  it.each([
    ['createKafkaConsumer', 'processing', /option 'processing' became 'batch'/],
    ['createKafkaConsumer', 'partitionConcurrency', /became 'concurrency'/],
    ['createKafkaConsumer', 'offsetFencing', /option 'offsetFencing' was removed/],
    ['createSqsConsumer', 'deadLetter', /became 'deadLetterQueueUrl'/],
    ['createSqsConsumer', 'idAttribute', /became 'idHeader'/],
    ['createRabbitConsumer', 'maxRedeliveries', /use core's 'maxAttempts'/],
    ['createNatsConsumer', 'fenceOf', /option 'fenceOf' was removed with offset fencing/],
  ])('%s({ %s })', (factory, key, message) => {
    expect(split(factory, { [key]: 1 })).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }));
    expect(split(factory, { [key]: 1 })).toThrow(message);
  });

  it('a retired name of another adapter is only "not an option" here', () => {
    expect(split('createRabbitConsumer', { idAttribute: 'x' })).toThrow(/option 'idAttribute' is unknown/);
  });
});
