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
      message:
        "options.deadLetterQueue is not an option of createSqsConsumer; did you mean 'deadLetterQueueUrl'?",
    });
    const { queueUrl: _, ...noQueue } = base;
    expect(codeAndMessage(() => resolveSqsConsumerOptions(noQueue as SqsConsumerOptions))).toEqual({
      code: 'INVALID_OPTION',
      message: 'options.queueUrl is required by createSqsConsumer',
    });
  });

  it.each([
    [{ client: {} }, 'options.client'],
    [{ queueUrl: 'q' }, 'options.queueUrl'],
    [{ idFrom: 'body' }, 'options.idFrom'],
    [{ idHeader: '' }, 'options.idHeader'],
    [{ deadLetterQueueUrl: 'nope' }, 'options.deadLetterQueueUrl'],
    [{ deadLetterQueueUrl: base.queueUrl }, 'options.deadLetterQueueUrl'],
    [{ stopTimeoutMs: -1 }, 'options.stopTimeoutMs'],
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
    [{ consumer: '' }, 'options.consumer'],
    [{ handler: 3 }, 'options.handler'],
  ] as [Partial<Record<string, unknown>>, string][])('names the bad field: %j', (patch, field) => {
    const { code, message } = codeAndMessage(() =>
      createSqsConsumer({ ...base, ...patch } as unknown as SqsConsumerOptions),
    );
    expect(code).toBe('INVALID_OPTION');
    expect(message.startsWith(field)).toBe(true);
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
