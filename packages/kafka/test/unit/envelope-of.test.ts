import type { KafkaMessage } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { resolveId } from '../../../core/src/message/envelope.js';
import { type EnvelopeContext, envelopeOf } from '../../src/envelope-of.js';

const ctx: EnvelopeContext = {
  topic: 'orders',
  partition: 2,
  groupId: 'g',
  idHeader: 'message-id',
  idFrom: 'header' as const,
  attempt: 1,
  redelivered: false,
};

function msg(headers: KafkaMessage['headers'], value: Buffer | null = Buffer.from('{}')): KafkaMessage {
  return {
    key: Buffer.from('k1'),
    value,
    headers,
    offset: '41',
    timestamp: '0',
    attributes: 0,
  } as KafkaMessage;
}

describe('envelopeOf', () => {
  it('maps id, key, body and source', () => {
    const { envelope } = envelopeOf(msg({ 'message-id': Buffer.from('m-1'), other: 'x' }), ctx);
    expect(envelope.idUnusable).toBeUndefined();
    expect(envelope.id).toBe('m-1');
    expect(envelope.key).toBe('k1');
    expect(envelope.headers).toEqual({ 'message-id': 'm-1', other: 'x' });
    expect(envelope.source).toEqual({
      broker: 'kafka',
      queue: 'orders',
      partition: 2,
      offset: '41',
      group: 'g',
    });
  });

  it('leaves a missing id to core (which names it)', () => {
    const { envelope } = envelopeOf(msg({}), ctx);
    expect(envelope.id).toBeUndefined();
    expect(envelope.idUnusable).toBeUndefined();
  });

  it('marks an id header that is not UTF-8 unusable: core refuses it as an invalid id', () => {
    const { envelope } = envelopeOf(
      msg({ 'message-id': Buffer.from([0xff, 0xfe]), x: Buffer.from([0xc3]) }),
      ctx,
    );
    expect(envelope.idUnusable).toMatch(/not valid UTF-8/);
    expect(() => resolveId(envelope)).toThrow(expect.objectContaining({ code: 'INVALID_ID' }));
    expect(envelope.headers.x).toBeUndefined();
  });

  it('marks repeated ids that differ unusable, accepts repeats that agree', () => {
    expect(envelopeOf(msg({ 'message-id': ['a', 'b'] }), ctx).envelope.idUnusable).toMatch(
      /different values/,
    );
    expect(envelopeOf(msg({ 'message-id': ['a', Buffer.from('a')] }), ctx).envelope.id).toBe('a');
  });

  it('lets idOf decide over an unusable id header', () => {
    const { envelope } = envelopeOf(msg({ 'message-id': Buffer.from([0xff]) }), ctx);
    expect(resolveId(envelope, () => 'from-body')).toBe('from-body');
  });

  it('uses topic/partition/offset only when asked', () => {
    expect(envelopeOf(msg({}), { ...ctx, idFrom: 'offset' as const }).envelope.id).toBe('orders/2/41');
  });

  it('maps a null value (tombstone) to an empty body', () => {
    expect(envelopeOf(msg({ 'message-id': 'a' }, null), ctx).envelope.body.length).toBe(0);
  });
});
