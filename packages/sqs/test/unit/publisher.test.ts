import type { OutboxMessage, OutboxPublisher } from '@once/core';
import { describe, expect, it } from 'vitest';
import { createSqsPublisher } from '../../src/index.js';
import { sqsToken } from '../../src/sqs-body.js';
import { fakeClient } from './fake-client.js';

const FIFO = 'http://h/000/q.fifo';
const STD = 'http://h/000/q';

type Entry = { Id: string; MessageBody: string; MessageGroupId?: string; MessageDeduplicationId?: string };

describe('createSqsPublisher', () => {
  it('sets the id attribute, dedup id and group id, and batches by ten per queue', async () => {
    const { client, calls } = fakeClient((c) => ({
      Successful: (c.input.Entries as Entry[]).map((e) => ({ Id: e.Id, MessageId: `sqs-${e.MessageBody}` })),
    }));
    const p = createSqsPublisher({ client });
    const msgs = Array.from({ length: 12 }, (_, i) => ({
      id: `o${i}`,
      destination: FIFO,
      key: `k${i % 2}`,
      body: `${i}`,
    }));
    msgs.push({ id: 's1', destination: STD, key: '', body: 'std' });
    const results = await p.publish(msgs);
    expect(results.every((r) => r.ok)).toBe(true);
    expect(results[0]).toEqual({ id: 'o0', ok: true, sqsMessageId: 'sqs-0' });
    // Queues are sent to in parallel; one queue's calls go in order.
    const fifoCalls = calls.filter((c) => c.input.QueueUrl === FIFO);
    expect(fifoCalls.map((c) => (c.input.Entries as Entry[]).length)).toEqual([10, 2]);
    const stdCalls = calls.filter((c) => c.input.QueueUrl === STD);
    expect(stdCalls).toHaveLength(1);
    const first = (fifoCalls[0]!.input.Entries as Entry[])[1]!;
    expect(first).toMatchObject({
      MessageBody: '1',
      MessageGroupId: 'k1',
      MessageDeduplicationId: 'o1',
      MessageAttributes: { 'message-id': { DataType: 'String', StringValue: 'o1' } },
    });
    const std = (stdCalls[0]!.input.Entries as Entry[])[0]!;
    expect(std.MessageGroupId).toBeUndefined();
    expect(std.MessageDeduplicationId).toBeUndefined();
  });

  it('a republish goes to a FIFO queue with its own deduplication id, the id still in message-id; a standard queue gets none', async () => {
    const { client, calls } = fakeClient((c) => ({
      Successful: (c.input.Entries as Entry[]).map((e) => ({ Id: e.Id })),
    }));
    const p = createSqsPublisher({ client });
    const republish = { deduplicationId: '4f0b0f9e-9f07-4a48-9d8f-0c8d2f5b7a11' };
    const results = await p.publish([
      { id: 'order-7', destination: FIFO, key: 'g', body: 'again', republish },
      { id: 'order-8', destination: FIFO, key: 'g', body: 'first' },
      { id: 'order-9', destination: STD, key: 'g', body: 'again', republish },
    ]);
    expect(results.map((r) => r.ok)).toEqual([true, true, true]);
    const fifo = calls.find((c) => c.input.QueueUrl === FIFO)!.input.Entries as Entry[];
    expect(fifo[0]).toMatchObject({
      MessageDeduplicationId: republish.deduplicationId,
      MessageAttributes: { 'message-id': { DataType: 'String', StringValue: 'order-7' } },
    });
    expect(fifo[1]!.MessageDeduplicationId).toBe('order-8');
    const std = (calls.find((c) => c.input.QueueUrl === STD)!.input.Entries as Entry[])[0]!;
    expect(std.MessageDeduplicationId).toBeUndefined();
    expect(std).toMatchObject({ MessageAttributes: { 'message-id': { StringValue: 'order-9' } } });
  });

  it('retries entries that failed inside a successful response, not sender faults', async () => {
    let round = 0;
    const { client, calls } = fakeClient((c) => {
      round++;
      const entries = c.input.Entries as Entry[];
      return {
        Successful: entries
          .filter((e) => e.MessageBody === 'ok' || round > 1)
          .filter((e) => e.MessageBody !== 'bad')
          .map((e) => ({ Id: e.Id })),
        Failed: entries
          .filter((e) => (e.MessageBody === 'flaky' && round === 1) || e.MessageBody === 'bad')
          .map((e) => ({
            Id: e.Id,
            Code: e.MessageBody === 'bad' ? 'InvalidMessageContents' : 'InternalError',
            SenderFault: e.MessageBody === 'bad',
          })),
      };
    });
    const p = createSqsPublisher({ client, retryDelayMs: 1 });
    const results = await p.publish([
      { id: 'a', destination: STD, body: 'ok' },
      { id: 'b', destination: STD, body: 'flaky' },
      { id: 'c', destination: STD, body: 'bad' },
    ]);
    expect(results.map((r) => r.ok)).toEqual([true, true, false]);
    expect(results[2]).toMatchObject({
      ok: false,
      retryable: false,
      error: { code: 'InvalidMessageContents' },
    });
    expect(calls).toHaveLength(2);
    expect((calls[1]!.input.Entries as Entry[]).map((e) => e.MessageBody)).toEqual(['flaky']);
  });

  it('reports a call that keeps failing as retryable, after maxRetries more rounds', async () => {
    const { client, calls } = fakeClient(() => {
      throw new Error('ECONNREFUSED');
    });
    const results = await createSqsPublisher({ client, maxRetries: 2, retryDelayMs: 1 }).publish([
      { id: 'a', destination: STD, body: 'x' },
    ]);
    expect(results[0]).toMatchObject({ ok: false, retryable: true, error: { message: 'ECONNREFUSED' } });
    expect(calls).toHaveLength(3);
  });

  it('refuses a FIFO message without a key and one with too many attributes, without a call', async () => {
    const { client, calls } = fakeClient(() => ({}));
    const headers = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`h${i}`, 'v']));
    const results = await createSqsPublisher({ client }).publish([
      { id: 'a', destination: FIFO, body: 'x' },
      { id: 'b', destination: STD, body: 'x', headers },
    ]);
    expect(results[0]).toMatchObject({
      ok: false,
      retryable: false,
      error: { code: 'SQS_MISSING_GROUP_ID' },
    });
    expect(results[0]!.ok === false && results[0]!.error.message).toMatch(/needs a key/);
    expect(results[1]).toMatchObject({ ok: false, error: { code: 'SQS_TOO_MANY_ATTRIBUTES' } });
    expect(calls).toHaveLength(0);
  });

  it("is core's OutboxPublisher: relay rows go to the fixed queueUrl whatever the destination name", async () => {
    const { client, calls } = fakeClient((c) => ({
      Successful: (c.input.Entries as Entry[]).map((e) => ({ Id: e.Id })),
    }));
    const publisher: OutboxPublisher = createSqsPublisher({ client, queueUrl: FIFO });
    const row: OutboxMessage = {
      id: 'r1',
      destination: 'invoices',
      key: 'k',
      body: Buffer.from('{}'),
      headers: { a: 'b' },
    };
    expect(await publisher.publish([row])).toEqual([{ id: 'r1', ok: true, sqsMessageId: undefined }]);
    expect(calls[0]!.input.QueueUrl).toBe(FIFO);
    expect((calls[0]!.input.Entries as Entry[])[0]).toMatchObject({
      MessageGroupId: 'k',
      MessageDeduplicationId: 'r1',
      MessageAttributes: { 'message-id': { StringValue: 'r1' }, a: { StringValue: 'b' } },
    });
  });

  it('validates its options', () => {
    expect(() => createSqsPublisher({ client: fakeClient(() => ({})).client, queueUrl: 'q' })).toThrow(
      /option 'queueUrl'/,
    );
    expect(() => createSqsPublisher({ client: {} as never })).toThrow(/option 'client'/);
    expect(() => createSqsPublisher({ client: fakeClient(() => ({})).client, maxRetries: -1 })).toThrow(
      /option 'maxRetries'/,
    );
  });
});

describe('sqsToken', () => {
  it('keeps a valid token and hashes anything SQS would refuse', () => {
    expect(sqsToken('order-1:v2')).toBe('order-1:v2');
    expect(sqsToken('x'.repeat(129))).toMatch(/^[0-9a-f]{64}$/);
    expect(sqsToken('with space')).toMatch(/^[0-9a-f]{64}$/);
    expect(sqsToken('é')).toBe(sqsToken('é'));
  });
});
