import { describe, expect, it } from 'vitest';
import { createSqsConsumer, type SqsConsumerOptions } from '../../src/index.js';
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
    const { sqs: o, inbox } = resolveSqsConsumerOptions({ ...base, maxAttempts: 7, schema: 'x' });
    expect(o).toMatchObject({
      consumer: 'c',
      idFrom: 'header',
      idHeader: 'message-id',
      deadLetterQueueUrl: undefined,
      batch: false,
      receivers: 1,
      maxInFlight: 50,
      concurrency: 10,
      waitTimeSeconds: 20,
      visibilityTimeoutS: 30,
      heartbeat: true,
      heartbeatIntervalMs: 10_000,
      stopTimeoutMs: 30_000,
    });
    expect(inbox).toMatchObject({ consumer: 'c', schema: 'x', maxAttempts: 7 });
    expect(inbox).not.toHaveProperty('queueUrl');
    expect(inbox).not.toHaveProperty('receivers');
    expect(Object.isFrozen(o)).toBe(true);
  });

  it('names the consumer after the queue by default', () => {
    const { consumer: _, ...noName } = base;
    expect(resolveSqsConsumerOptions(noName).sqs.consumer).toBe('q.fifo');
  });

  it('refuses an unknown key naming the nearest one, and a missing required one', () => {
    expect(
      codeAndMessage(() =>
        resolveSqsConsumerOptions({ ...base, deadLetterQueue: 'x' } as unknown as SqsConsumerOptions),
      ),
    ).toEqual({
      code: 'INVALID_OPTION',
      message: "createSqsConsumer: option 'deadLetterQueue' is unknown; did you mean 'deadLetterQueueUrl'?",
    });
    const { queueUrl: _, ...noQueue } = base;
    expect(codeAndMessage(() => resolveSqsConsumerOptions(noQueue as SqsConsumerOptions))).toEqual({
      code: 'INVALID_OPTION',
      message: "createSqsConsumer: option 'queueUrl' is required",
    });
  });

  it.each([
    [{ client: {} }, "option 'client'"],
    [{ queueUrl: 'q' }, "option 'queueUrl'"],
    [{ idFrom: 'body' }, "option 'idFrom'"],
    [{ idHeader: '' }, "option 'idHeader'"],
    [{ deadLetterQueueUrl: 'nope' }, "option 'deadLetterQueueUrl'"],
    [{ deadLetterQueueUrl: base.queueUrl }, "option 'deadLetterQueueUrl'"],
    [{ stopTimeoutMs: -1 }, "option 'stopTimeoutMs'"],
    [{ batch: 'yes' }, "option 'batch'"],
    [{ keyOf: 'account' }, "option 'keyOf'"],
    [{ receivers: 0 }, "option 'receivers'"],
    [{ maxInFlight: 1.5 }, "option 'maxInFlight'"],
    [{ concurrency: -1 }, "option 'concurrency'"],
    [{ waitTimeSeconds: 21 }, "option 'waitTimeSeconds'"],
    [{ visibilityTimeoutS: 0 }, "option 'visibilityTimeoutS'"],
    [{ visibilityTimeoutS: 2, heartbeatIntervalMs: 2000 }, "option 'heartbeatIntervalMs'"],
    [{ maxHeldMs: Number.NaN }, "option 'maxHeldMs'"],
    [{ receiveBackoffMs: 100, receiveBackoffMaxMs: 50 }, "option 'receiveBackoffMaxMs'"],
    [{ consumer: '' }, "option 'consumer'"],
    [{ handler: 3 }, "option 'handler'"],
  ] as [Partial<Record<string, unknown>>, string][])('names the bad field: %j', (patch, field) => {
    const { code, message } = codeAndMessage(() =>
      createSqsConsumer({ ...base, ...patch } as unknown as SqsConsumerOptions),
    );
    expect(code).toBe('INVALID_OPTION');
    expect(message.startsWith(`createSqsConsumer: ${field}`)).toBe(true);
  });

  it('keeps keyOf for the consumer, out of the inbox options', () => {
    const keyOf = () => 'k';
    const { sqs: o, inbox } = resolveSqsConsumerOptions({ ...base, batch: true, keyOf });
    expect(o.keyOf).toBe(keyOf);
    expect(inbox).not.toHaveProperty('keyOf');
  });

  it('allows the heartbeat interval to be anything when the heartbeat is off', () => {
    expect(
      resolveSqsConsumerOptions({
        ...base,
        heartbeat: false,
        visibilityTimeoutS: 1,
        heartbeatIntervalMs: 5000,
      }).sqs.heartbeat,
    ).toBe(false);
  });
});
