import type { Envelope, Inbox, Outcome } from '@once/core';
import { Gate, Limiter } from '@once/core/adapter';
import { describe, expect, it } from 'vitest';
import type { Held } from '../../src/held.js';
import { type ChainContext, runChain } from '../../src/run-chain.js';
import { Settler } from '../../src/settler.js';
import { fakeClient } from './fake-client.js';

function held(id: string, group: string | undefined): Held {
  const envelope: Envelope = {
    id,
    body: Buffer.from(id),
    headers: {},
    key: group,
    source: { broker: 'sqs', queue: 'q' },
    attempt: 1,
    redelivered: false,
  };
  return {
    message: { MessageId: id },
    envelope,
    receipt: `r-${id}`,
    group,
    receivedAt: 0,
    extendedAt: 0,
    capped: false,
    settling: false,
  };
}

/** A real Settler over a recording client; the inbox processes all but `retryIds`, which it retries. */
function setup(retryIds: string[] = []) {
  const { client, calls } = fakeClient((call) => {
    const entries = (call.input.Entries ?? []) as { Id: string }[];
    return { Successful: entries.map((e) => ({ Id: e.Id })) };
  });
  const forgotten: string[] = [];
  const deletedWhenForgotten: number[] = [];
  const logger = { debug() {}, info() {}, warn() {}, error() {} };
  const settler = new Settler({
    client,
    queueUrl: 'http://h/q.fifo',
    settleContext: { consumer: 'c', recordFailed: true },
    idHeader: 'message-id',
    lingerMs: 0,
    logger,
    events: { emit() {} } as never,
    noteError() {},
    retryDelayMs: () => 1000,
    forget: (e) => {
      forgotten.push(e.envelope.id!);
      deletedWhenForgotten.push(calls.filter((c) => c.name === 'DeleteMessageBatchCommand').length);
    },
    track() {},
  });
  const outcome = (e: Envelope): Outcome =>
    retryIds.includes(e.id!)
      ? {
          status: 'retry',
          id: e.id,
          envelope: e,
          error: { name: 'E', message: 'x' },
          delayMs: 500,
          spent: true,
        }
      : { status: 'processed', id: e.id!, envelope: e, result: undefined };
  const inbox = {
    options: { retryDelayMs: () => 1000 },
    // A transaction takes a while: longer than lingerMs (0), so a delete queued at once would go alone.
    process: async (e: Envelope) => {
      await new Promise((r) => setTimeout(r, 2));
      return outcome(e);
    },
    processBatch: async (es: Envelope[]) => es.map(outcome),
    notRun: () => [],
  } as unknown as Inbox;
  const ctx: ChainContext<unknown> = {
    inbox,
    limiter: new Limiter(4),
    gate: new Gate(),
    settler,
    starts: { fresh: undefined, suspect: {} },
    logger,
    forget() {},
    noteError() {},
  };
  const deletes = () =>
    calls
      .filter((c) => c.name === 'DeleteMessageBatchCommand')
      .map((c) => (c.input.Entries as { ReceiptHandle: string }[]).map((e) => e.ReceiptHandle));
  return { ctx, settler, calls, deletes, forgotten, deletedWhenForgotten };
}

describe('runChain deletes', () => {
  it("FIFO: a group's acks go in one call when its chain ends, each let go of at its own settle", async () => {
    const { ctx, settler, deletes, forgotten, deletedWhenForgotten } = setup();
    await runChain(ctx, [held('a', 'g'), held('b', 'g'), held('c', 'g')]);
    await settler.drain();
    expect(deletes()).toEqual([['r-a', 'r-b', 'r-c']]);
    // Each message's slot was freed as it was settled, before any delete call.
    expect(forgotten).toEqual(['a', 'b', 'c']);
    expect(deletedWhenForgotten).toEqual([0, 0, 0]);
  });

  it('FIFO: a retry sends the rest back, and the acks before it are still deleted', async () => {
    const { ctx, settler, calls, deletes } = setup(['b']);
    await runChain(ctx, [held('a', 'g'), held('b', 'g'), held('c', 'g')]);
    await settler.drain();
    expect(deletes()).toEqual([['r-a']]);
    const visibility = calls
      .filter((c) => c.name === 'ChangeMessageVisibilityBatchCommand')
      .flatMap((c) => (c.input.Entries as { ReceiptHandle: string }[]).map((e) => e.ReceiptHandle));
    expect(visibility.sort()).toEqual(['r-b', 'r-c']);
  });

  it('standard queue: deletes are queued as each message settles', async () => {
    const { ctx, settler, deletes, deletedWhenForgotten } = setup();
    // Each delete goes on its own (lingerMs 0, transactions of 2 ms), not held for the chain.
    const run = runChain(ctx, [held('a', undefined), held('b', undefined)]);
    await run;
    await settler.drain();
    expect(deletes()).toEqual([['r-a'], ['r-b']]);
    // a's delete went before b was settled.
    expect(deletedWhenForgotten).toEqual([0, 1]);
  });
});
