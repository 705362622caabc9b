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
    const o = resolveKafkaConsumerOptions(base as KafkaConsumerOptions).kafka;
    expect(o.batch).toBe(true);
    expect(o.consumer).toBe('g');
    expect(o.idFrom).toBe('header');
    expect(o.idHeader).toBe('message-id');
    expect(o.concurrency).toBe(3);
    expect(o.stopTimeoutMs).toBe(30_000);
    expect(o.deadLetterTopicOf('orders')).toBe('orders.dlq');
    expect(Object.isFrozen(o)).toBe(true);
  });

  it('names the bad field', () => {
    expect(bad({ kafka: {} }).message).toMatch(/^createKafkaConsumer: option 'kafka' /);
    expect(bad({ groupId: '' }).message).toMatch(/^createKafkaConsumer: option 'groupId' /);
    expect(bad({ topics: [] }).message).toMatch(/^createKafkaConsumer: option 'topics' /);
    expect(bad({ topics: ['a', 3] }).message).toMatch(/^createKafkaConsumer: option 'topics\[1\]' /);
    expect(bad({ batch: 'stream' }).message).toMatch(/^createKafkaConsumer: option 'batch' /);
    expect(bad({ batchSize: 0 }).message).toMatch(/^createKafkaConsumer: option 'batchSize' /);
    expect(bad({ concurrency: 0 }).message).toMatch(/^createKafkaConsumer: option 'concurrency' /);
    expect(bad({ maxBatchMs: Number.NaN }).message).toMatch(/^createKafkaConsumer: option 'maxBatchMs' /);
    expect(bad({ sessionTimeoutMs: '6s' }).message).toMatch(
      /^createKafkaConsumer: option 'sessionTimeoutMs' /,
    );
    expect(bad({ sessionTimeoutMs: 6000, heartbeatIntervalMs: 6000 }).message).toMatch(
      /^createKafkaConsumer: option 'heartbeatIntervalMs' /,
    );
    expect(bad({ rebalanceTimeoutMs: 10 }).message).toMatch(
      /^createKafkaConsumer: option 'rebalanceTimeoutMs' /,
    );
    expect(bad({ deadLetterTopic: 42 }).message).toMatch(/^createKafkaConsumer: option 'deadLetterTopic' /);
    expect(bad({ idFrom: 'yes' }).message).toMatch(/^createKafkaConsumer: option 'idFrom' /);
    expect(bad({ batchSize: 1.5 }).code).toBe('INVALID_OPTION');
  });

  it('refuses unknown keys, naming the nearest, and missing required ones', () => {
    const typo = bad({ maxBatchSize: 10 });
    expect(typo.code).toBe('INVALID_OPTION');
    // maxBatchSize was an option of an earlier 0.x: the refusal names what replaced it.
    expect(typo.message).toBe(
      "createKafkaConsumer: option 'maxBatchSize' became 'batchSize' (see CHANGELOG.md)",
    );
    expect(bad({ batchSze: 10 }).message).toBe(
      "createKafkaConsumer: option 'batchSze' is unknown; did you mean 'batchSize'?",
    );
    expect(bad({ partitionConcurency: 2 }).message).toContain("option 'partitionConcurency' is unknown");
    expect(bad({ maxAttemps: 2 }).message).toContain("did you mean 'maxAttempts'?");
    expect(bad({ handler: undefined }).message).toBe("createKafkaConsumer: option 'handler' is required");
    expect(bad({ groupId: undefined }).message).toBe("createKafkaConsumer: option 'groupId' is required");
  });

  it('refuses the removed offset fencing (issue #28) rather than running without it unnoticed', () => {
    expect(bad({ offsetFencing: true }).message).toMatch(
      /^createKafkaConsumer: option 'offsetFencing' was removed/,
    );
    expect(bad({ fenceOf: () => undefined }).message).toMatch(
      /^createKafkaConsumer: option 'fenceOf' was removed with offset fencing/,
    );
  });

  it('resolves the dead-letter topic forms', () => {
    const off = resolveKafkaConsumerOptions({
      ...base,
      deadLetterTopic: false,
    } as KafkaConsumerOptions).kafka;
    expect(off.deadLetterTopicOf('t')).toBeUndefined();
    const fixed = resolveKafkaConsumerOptions({
      ...base,
      deadLetterTopic: 'dead',
    } as KafkaConsumerOptions).kafka;
    expect(fixed.deadLetterTopicOf('t')).toBe('dead');
    const fn = resolveKafkaConsumerOptions({
      ...base,
      deadLetterTopic: (t: string) => `${t}-x`,
    } as never).kafka;
    expect(fn.deadLetterTopicOf('t')).toBe('t-x');
  });
});
