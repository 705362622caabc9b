import { OnceError } from '@once/core';
import { describe, expect, it } from 'vitest';
import { destinationOf, systemOf } from '../../src/attributes.js';
import { type InstrumentTarget, instrument } from '../../src/index.js';
import { kindOf } from '../../src/targets.js';

const on = () => () => {};
const pool = {
  query: () => Promise.reject(new Error('unused')),
  connect: () => Promise.reject(new Error('unused')),
};
const inbox = { consumer: 'c', options: { pool, schema: 's', logger: console }, on };

describe('kindOf', () => {
  it('tells inboxes, relays and each adapter apart by what they expose', () => {
    const t = (x: unknown) => kindOf(x as InstrumentTarget).kind;
    expect(t(inbox)).toBe('inbox');
    expect(t({ on, runOnce: on })).toBe('relay');
    expect(t({ inbox, on, options: { topics: ['a'] } })).toBe('kafka');
    expect(t({ inbox, on, options: { queueUrl: 'http://x/1/q' } })).toBe('sqs');
    expect(t({ inbox, on, options: { queue: 'q' } })).toBe('rabbitmq');
    expect(t({ inbox, on, options: { subject: 'orders.>', durable: 'billing' } })).toBe('nats');
    expect(t({ inbox })).toBe('consumer');
  });

  it('rejects anything else with INVALID_OPTION naming the target', () => {
    for (const bad of [null, 42, {}, { on }]) {
      let caught: unknown;
      try {
        kindOf(bad as InstrumentTarget);
      } catch (err) {
        caught = err;
      }
      expect(OnceError.is(caught) && caught.code).toBe('INVALID_OPTION');
      expect(String((caught as Error).message)).toMatch(/instrument\(target\)/);
    }
  });
});

describe('instrument options', () => {
  it('names the bad field', () => {
    const target: InstrumentTarget = { on, runOnce: () => Promise.resolve(0) };
    expect(() => instrument(target, { pool: {} as never })).toThrow(/option 'pool'/);
    expect(() => instrument(target, { meterProvider: {} as never })).toThrow(/option 'meterProvider'/);
    expect(() => instrument(target, { outboxPendingLimit: 0 })).toThrow(/outboxPendingLimit/);
    expect(() => instrument(target, { schema: 'bad"name', pool })).toThrow(/option 'schema'/);
  });
});

describe('attributes', () => {
  it('maps broker names to messaging.system values', () => {
    expect(systemOf('sqs')).toBe('aws_sqs');
    expect(systemOf('kafka')).toBe('kafka');
    expect(systemOf('rabbitmq')).toBe('rabbitmq');
    expect(systemOf('nats')).toBe('nats');
  });

  it('names an SQS queue by the last segment of its URL, other sources as they are', () => {
    expect(destinationOf('sqs', 'https://sqs.eu-west-1.amazonaws.com/123/orders.fifo')).toBe('orders.fifo');
    expect(destinationOf('sqs', 'http://127.0.0.1:9324/000000000000/q/')).toBe('q');
    expect(destinationOf('sqs', 'plain')).toBe('plain');
    expect(destinationOf('kafka', 'a/b')).toBe('a/b');
  });
});
