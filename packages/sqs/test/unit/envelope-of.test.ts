import { describe, expect, it } from 'vitest';
import { envelopeOf } from '../../src/envelope-of.js';

const settings = { queueUrl: 'http://h/q.fifo', idFrom: 'header' as const, idHeader: 'message-id' };
const message = {
  MessageId: 'sqs-1',
  ReceiptHandle: 'r',
  Body: '{"a":1}',
  Attributes: {
    ApproximateReceiveCount: '3',
    MessageGroupId: 'g1',
    MessageDeduplicationId: 'd1',
    SequenceNumber: '42',
  },
  MessageAttributes: {
    'message-id': { DataType: 'String', StringValue: 'm1' },
    n: { DataType: 'Number', StringValue: '5' },
    b: { DataType: 'Binary', BinaryValue: Uint8Array.from([1, 2]) },
  },
};

describe('envelopeOf', () => {
  it('maps body, attributes, group and receive count', () => {
    const e = envelopeOf(message, settings);
    expect(e).toMatchObject({
      id: 'm1',
      key: 'g1',
      attempt: 3,
      redelivered: true,
      headers: { 'message-id': 'm1', n: '5', b: 'AQI=' },
      source: { broker: 'sqs', queue: 'http://h/q.fifo', group: 'g1', offset: '42' },
    });
    expect(e.body.toString()).toBe('{"a":1}');
  });

  it('takes the id from where it is told, and says where (a failed message keeps it in its origin)', () => {
    expect(envelopeOf(message, { ...settings, idFrom: 'deduplication-id' })).toMatchObject({
      id: 'd1',
      source: { idFrom: 'deduplication-id' },
    });
    expect(envelopeOf(message, { ...settings, idFrom: 'sqs-message-id' }).id).toBe('sqs-1');
    expect(envelopeOf(message, { ...settings, idHeader: 'other' }).id).toBeUndefined();
  });

  it('treats a first receive (or a missing count) as attempt 1, not redelivered', () => {
    const e = envelopeOf({ Body: 'x', Attributes: {} }, settings);
    expect(e).toMatchObject({ attempt: 1, redelivered: false, key: undefined, id: undefined });
    expect(e.source).toEqual({ broker: 'sqs', queue: 'http://h/q.fifo', idFrom: 'header' });
  });
});
