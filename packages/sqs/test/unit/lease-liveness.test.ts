import type { Message } from '@aws-sdk/client-sqs';
import { silentLogger, TypedEmitter } from '@once/core/adapter';
import { describe, expect, it } from 'vitest';
import { envelopeOf } from '../../src/envelope-of.js';
import type { SqsConsumerEventMap } from '../../src/events.js';
import type { Held } from '../../src/held.js';
import { Settler } from '../../src/settler.js';
import { type Call, fakeClient } from './fake-client.js';

const QUEUE = 'http://sqs/q';

function held(receipt: string): Held {
  const message: Message = { MessageId: `m-${receipt}`, ReceiptHandle: receipt, Body: '{}' };
  return {
    message,
    envelope: envelopeOf(message, { queueUrl: QUEUE, idFrom: 'sqs-message-id', idHeader: 'message-id' }),
    receipt,
    group: undefined,
    receivedAt: 0,
    extendedAt: 0,
    capped: false,
    settling: false,
  };
}

function settler(respond: (call: Call) => unknown = () => ({})) {
  const { client, calls } = fakeClient(respond);
  const tracked: Promise<unknown>[] = [];
  const s = new Settler({
    client,
    queueUrl: QUEUE,
    settleContext: { consumer: 'test', recordFailed: true },
    idHeader: 'message-id',
    lingerMs: 0,
    logger: silentLogger,
    events: new TypedEmitter<SqsConsumerEventMap>(silentLogger),
    noteError: () => {},
    retryDelayMs: () => 1000,
    forget: () => {},
    track: (p) => tracked.push(p),
  });
  return { s, calls, settled: () => Promise.all(tracked) };
}

describe('lease mode: the lease clock drives visibility (Settler.lease)', () => {
  it('sets the visibility to the lease in whole seconds, capped at 12 hours, and marks the message leased', async () => {
    const { s, calls } = settler();
    const e = held('r1');
    await s.lease(e, 30_000);
    await s.lease(e, 1_500);
    await s.lease(e, 10);
    await s.lease(e, 100_000_000);
    expect(calls.map((c) => [c.name, c.input.ReceiptHandle, c.input.VisibilityTimeout])).toEqual([
      ['ChangeMessageVisibilityCommand', 'r1', 30],
      ['ChangeMessageVisibilityCommand', 'r1', 2],
      ['ChangeMessageVisibilityCommand', 'r1', 1],
      ['ChangeMessageVisibilityCommand', 'r1', 43_200],
    ]);
    expect(e.leased).toBe(true);
  });

  it('rejects when SQS refuses (core logs it) and does nothing once the message is settling', async () => {
    const { s, calls } = settler(() => {
      throw Object.assign(new Error('stale'), { name: 'ReceiptHandleIsInvalid' });
    });
    const e = held('r2');
    await expect(s.lease(e, 5_000)).rejects.toThrow('stale');
    e.settling = true;
    await s.lease(e, 5_000);
    expect(calls).toHaveLength(1);
  });

  it("a retry's visibility change waits for a lease extension in flight, so it is not undone by it", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const { s, calls, settled } = settler(async (call) => {
      if (call.name === 'ChangeMessageVisibilityCommand') await gate;
      return { Successful: [{ Id: '0' }] };
    });
    const e = held('r3');
    const extension = s.lease(e, 30_000);
    s.delay(e, 4_000, 'retry'); // a `busy` or `retry` outcome: redeliver after delayMs
    s.flush();
    await new Promise((r) => setTimeout(r, 20));
    expect(calls.map((c) => c.name)).toEqual(['ChangeMessageVisibilityCommand']);
    release();
    await extension;
    await settled();
    await s.drain();
    expect(calls.map((c) => c.name)).toEqual([
      'ChangeMessageVisibilityCommand',
      'ChangeMessageVisibilityBatchCommand',
    ]);
    expect(calls[1]!.input.Entries).toEqual([{ Id: '0', ReceiptHandle: 'r3', VisibilityTimeout: 4 }]);
  });

  it('a lease-mode `busy` outcome is redelivered after its delayMs', async () => {
    const { s, calls, settled } = settler(() => ({ Successful: [{ Id: '0' }] }));
    const e = held('r4');
    const plan = s.planOf({ status: 'busy', id: 'x', envelope: e.envelope, delayMs: 2_500 });
    expect(plan).toMatchObject({ kind: 'retry', delayMs: 2_500 });
    await s.settle(e, plan);
    s.flush();
    await settled();
    expect(calls.map((c) => [c.name, c.input.Entries])).toEqual([
      ['ChangeMessageVisibilityBatchCommand', [{ Id: '0', ReceiptHandle: 'r4', VisibilityTimeout: 3 }]],
    ]);
  });
});
