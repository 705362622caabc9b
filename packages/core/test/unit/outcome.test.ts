import { describe, expect, it } from 'vitest';
import { serializeError } from '../../src/errors.js';
import { OnceError, PermanentError } from '../../src/index.js';
import { classifyDbError } from '../../src/pg/sqlstate.js';

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
