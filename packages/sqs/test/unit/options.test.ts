import { describe, expect, it } from 'vitest';
import type { SqsConsumerOptions } from '../../src/index.js';
import { resolveSqsConsumerOptions } from '../../src/options.js';
import { fakeClient } from './fake-client.js';

const pool = { connect: async () => ({}) as never, query: async () => ({ rows: [], rowCount: 0 }) };
const base: SqsConsumerOptions = {
  client: fakeClient(() => ({})).client,
  queueUrl: 'http://127.0.0.1:9324/000000000000/q.fifo',
  pool,
  consumer: 'c',
  handler: () => {},
};

function codeAndMessage(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    return { code: (err as { code: string }).code, message: (err as Error).message };
  }
  throw new Error('did not throw');
}

describe('resolveSqsConsumerOptions', () => {
  it('applies defaults and keeps core options for the inbox', () => {
    const o = resolveSqsConsumerOptions({ ...base, maxAttempts: 7, schema: 'x' });
    expect(o).toMatchObject({
      idFrom: 'attribute',
      idAttribute: 'message-id',
      batch: false,
      receivers: 1,
      maxInFlight: 50,
      concurrency: 10,
      waitTimeSeconds: 20,
      visibilityTimeoutS: 30,
      heartbeat: true,
      heartbeatIntervalMs: 10_000,
      maxAttempts: 7,
    });
    expect(o.inbox).toMatchObject({ consumer: 'c', schema: 'x', maxAttempts: 7 });
    expect(o.inbox).not.toHaveProperty('queueUrl');
    expect(o.inbox).not.toHaveProperty('receivers');
    expect(Object.isFrozen(o)).toBe(true);
  });

  it.each([
    [{ client: {} }, 'options.client'],
    [{ queueUrl: 'q' }, 'options.queueUrl'],
    [{ idFrom: 'body' }, 'options.idFrom'],
    [{ idAttribute: '' }, 'options.idAttribute'],
    [{ deadLetter: 'later' }, 'options.deadLetter'],
    [{ deadLetter: { queueUrl: 'nope' } }, 'options.deadLetter.queueUrl'],
    [{ deadLetter: { queueUrl: base.queueUrl } }, 'options.deadLetter.queueUrl'],
    [{ batch: 'yes' }, 'options.batch'],
    [{ keyOf: 'account' }, 'options.keyOf'],
    [{ receivers: 0 }, 'options.receivers'],
    [{ maxInFlight: 1.5 }, 'options.maxInFlight'],
    [{ concurrency: -1 }, 'options.concurrency'],
    [{ waitTimeSeconds: 21 }, 'options.waitTimeSeconds'],
    [{ visibilityTimeoutS: 0 }, 'options.visibilityTimeoutS'],
    [{ visibilityTimeoutS: 2, heartbeatIntervalMs: 2000 }, 'options.heartbeatIntervalMs'],
    [{ maxHeldMs: Number.NaN }, 'options.maxHeldMs'],
    [{ receiveBackoffMs: 100, receiveBackoffMaxMs: 50 }, 'options.receiveBackoffMaxMs'],
    [{ maxAttempts: 0 }, 'options.maxAttempts'],
    [{ consumer: '' }, 'options.consumer'],
    [{ handler: 3 }, 'options.handler'],
  ] as [Partial<Record<string, unknown>>, string][])('names the bad field: %j', (patch, field) => {
    const { code, message } = codeAndMessage(() =>
      resolveSqsConsumerOptions({ ...base, ...patch } as unknown as SqsConsumerOptions),
    );
    expect(code).toBe('INVALID_OPTION');
    expect(message.startsWith(field)).toBe(true);
  });

  it('keeps keyOf for the consumer, out of the inbox options', () => {
    const keyOf = () => 'k';
    const o = resolveSqsConsumerOptions({ ...base, batch: true, keyOf });
    expect(o.keyOf).toBe(keyOf);
    expect(o.inbox).not.toHaveProperty('keyOf');
  });

  it('allows the heartbeat interval to be anything when the heartbeat is off', () => {
    expect(
      resolveSqsConsumerOptions({
        ...base,
        heartbeat: false,
        visibilityTimeoutS: 1,
        heartbeatIntervalMs: 5000,
      }).heartbeat,
    ).toBe(false);
  });
});
