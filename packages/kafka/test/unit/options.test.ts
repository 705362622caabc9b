import { OnceError } from '@once/core';
import { describe, expect, it } from 'vitest';
import { type KafkaConsumerOptions, resolveKafkaConsumerOptions } from '../../src/options.js';

const kafka = { consumer: () => ({}), producer: () => ({}), admin: () => ({}) } as never;
const base = { kafka, groupId: 'g', topics: ['t'], pool: {} as never, handler: () => {} };

function bad(patch: Record<string, unknown>): OnceError {
  try {
    resolveKafkaConsumerOptions({ ...base, ...patch } as KafkaConsumerOptions);
  } catch (err) {
    expect(OnceError.is(err)).toBe(true);
    return err as OnceError;
  }
  throw new Error('expected an error');
}

describe('resolveKafkaConsumerOptions', () => {
  it('applies defaults', () => {
    const o = resolveKafkaConsumerOptions(base as KafkaConsumerOptions);
    expect(o.processing).toBe('batch');
    expect(o.consumer).toBe('g');
    expect(o.messageIdHeader).toBe('message-id');
    expect(o.deadLetterTopicOf('orders')).toBe('orders.dlq');
    expect(Object.isFrozen(o)).toBe(true);
  });

  it('names the bad field', () => {
    expect(bad({ kafka: {} }).message).toMatch(/^options\.kafka /);
    expect(bad({ groupId: '' }).message).toMatch(/^options\.groupId /);
    expect(bad({ topics: [] }).message).toMatch(/^options\.topics /);
    expect(bad({ topics: ['a', 3] }).message).toMatch(/^options\.topics\[1\] /);
    expect(bad({ processing: 'stream' }).message).toMatch(/^options\.processing /);
    expect(bad({ maxBatchSize: 0 }).message).toMatch(/^options\.maxBatchSize /);
    expect(bad({ maxBatchMs: Number.NaN }).message).toMatch(/^options\.maxBatchMs /);
    expect(bad({ sessionTimeoutMs: '6s' }).message).toMatch(/^options\.sessionTimeoutMs /);
    expect(bad({ sessionTimeoutMs: 6000, heartbeatIntervalMs: 6000 }).message).toMatch(
      /^options\.heartbeatIntervalMs /,
    );
    expect(bad({ rebalanceTimeoutMs: 10 }).message).toMatch(/^options\.rebalanceTimeoutMs /);
    expect(bad({ deadLetterTopic: 42 }).message).toMatch(/^options\.deadLetterTopic /);
    expect(bad({ idFromOffset: 'yes' }).message).toMatch(/^options\.idFromOffset /);
    expect(bad({ maxBatchSize: 1.5 }).code).toBe('INVALID_OPTION');
  });

  it('resolves the dead-letter topic forms', () => {
    const off = resolveKafkaConsumerOptions({
      ...base,
      deadLetterTopic: false,
    } as KafkaConsumerOptions);
    expect(off.deadLetterTopicOf('t')).toBeUndefined();
    const fixed = resolveKafkaConsumerOptions({
      ...base,
      deadLetterTopic: 'dead',
    } as KafkaConsumerOptions);
    expect(fixed.deadLetterTopicOf('t')).toBe('dead');
    const fn = resolveKafkaConsumerOptions({ ...base, deadLetterTopic: (t: string) => `${t}-x` } as never);
    expect(fn.deadLetterTopicOf('t')).toBe('t-x');
  });
});
