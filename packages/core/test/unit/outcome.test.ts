import { describe, expect, it } from 'vitest';
import { serializeError } from '../../src/errors.js';
import { OnceError, type Outcome, PermanentError, settleActionOf } from '../../src/index.js';
import { classifyDbError } from '../../src/sqlstate.js';

const envelope = {
  body: Buffer.alloc(0),
  headers: {},
  source: { broker: 't', queue: 'q' },
  attempt: 1,
  redelivered: false,
};
const err = { name: 'E', message: 'm' };

describe('settleActionOf', () => {
  it.each<[Outcome, string]>([
    [{ status: 'processed', id: 'a', envelope, result: undefined }, 'ack'],
    [{ status: 'duplicate', id: 'a', envelope, result: undefined }, 'ack'],
    [{ status: 'conflict', id: 'a', envelope, action: 'dead-letter' }, 'dead-letter'],
    [{ status: 'conflict', id: 'a', envelope, action: 'ack' }, 'ack'],
    [{ status: 'failed', id: 'a', envelope, reason: 'permanent', error: err }, 'dead-letter'],
    [{ status: 'retry', id: 'a', envelope, error: err, delayMs: 5, spent: true }, 'retry'],
    [{ status: 'not-run', id: 'a', envelope, why: 'behind', error: err, delayMs: 0 }, 'retry'],
    [{ status: 'not-run', id: 'a', envelope, why: 'unavailable', error: err, delayMs: 5 }, 'retry'],
    [{ status: 'busy', id: 'a', envelope, delayMs: 5 }, 'retry'],
  ])('%#: maps %j', (outcome, action) => {
    expect(settleActionOf(outcome)).toBe(action);
  });
});

describe('classifyDbError', () => {
  it.each([
    ['55P03', 'busy'],
    ['40001', 'conflict-retry'],
    ['40P01', 'conflict-retry'],
    ['57P01', 'connection'],
    ['08006', 'connection'],
    ['ECONNRESET', 'connection'],
    ['42P01', 'schema-missing'],
    ['3F000', 'schema-missing'],
    ['53300', 'connection'],
    ['53100', 'connection'],
    ['25006', 'connection'],
    ['57P03', 'connection'],
    ['57014', 'timeout'],
    ['22P05', 'message'],
    ['22021', 'message'],
    ['23505', 'message'],
    ['23503', 'message'],
    ['54000', 'message'],
    ['25P02', 'message'],
    ['42703', 'other'],
  ])('%s → %s', (code, kind) => {
    expect(classifyDbError(Object.assign(new Error('x'), { code }))).toBe(kind);
  });
  it('recognises a dropped socket by its message', () => {
    expect(classifyDbError(new Error('Connection terminated unexpectedly'))).toBe('connection');
  });
});

describe('errors', () => {
  it('PermanentError is recognised across copies by its brand', () => {
    const e = new PermanentError('bad body');
    expect(OnceError.is(e)).toBe(true);
    expect(PermanentError.is(e)).toBe(true);
    expect(PermanentError.is(new OnceError('X', 'y'))).toBe(false);
    expect(OnceError.is({ code: 'PERMANENT' })).toBe(false);
  });
});

describe('serializeError', () => {
  it('keeps an error that is already serialised instead of wrapping it as "[object Object]"', () => {
    const once = serializeError(Object.assign(new Error('broker said no'), { code: 'E42' }));
    expect(serializeError(once)).toBe(once);
    expect(serializeError({ name: 'AMQP', message: 'unroutable' })).toEqual({
      name: 'AMQP',
      message: 'unroutable',
    });
    // A thrown object keeps its fields.
    expect(serializeError({ message: 'no name' })).toEqual({
      name: 'NonError',
      message: '{"message":"no name"}',
      fields: { message: 'no name' },
    });
    expect(serializeError({ code: 'E1', detail: 'x' })).toEqual({
      name: 'NonError',
      message: '{"code":"E1","detail":"x"}',
      code: 'E1',
      fields: { code: 'E1', detail: 'x' },
    });
    expect(serializeError(null)).toEqual({ name: 'NonError', message: 'null' });
    expect(serializeError('text')).toEqual({ name: 'NonError', message: 'text' });
  });
});
