import type { Envelope, Inbox, Outcome, ProcessOptions } from '@once/core';
import { Gate, Limiter, type SettlePlan, settlePlanOf } from '@once/core/adapter';
import { describe, expect, it } from 'vitest';
import type { Held } from '../../src/held.js';
import { planChains } from '../../src/plan-chains.js';
import { type ChainContext, runBatch, runChain } from '../../src/run-chain.js';
import type { Settler } from '../../src/settler.js';

function held(id: string, group: string | undefined, attempt = 1, key?: string): Held {
  const envelope: Envelope = {
    id,
    body: Buffer.from(id),
    headers: {},
    key: group,
    source: { broker: 'sqs', queue: 'q' },
    attempt,
    redelivered: attempt > 1,
  };
  return {
    message: { MessageId: id },
    envelope,
    receipt: `r-${id}`,
    group,
    key,
    receivedAt: 0,
    extendedAt: 0,
    capped: false,
    settling: false,
  };
}
const ids = (entries: Held[]) => entries.map((e) => e.envelope.id);

describe('planChains', () => {
  const fifo = { fifo: true, batch: false };
  it('FIFO: one chain per group, in receive order, each keyed by its group', () => {
    const es = [held('a', 'g1'), held('b', 'g2'), held('c', 'g1')];
    const chains = planChains(es, fifo);
    expect(chains.map((c) => [c.keys, ids(c.entries), c.batch])).toEqual([
      [['g:g1'], ['a', 'c'], false],
      [['g:g2'], ['b'], false],
    ]);
  });

  it('standard: fresh messages alone and unkeyed, redelivered ones together in order', () => {
    const chains = planChains([held('a', undefined), held('b', undefined, 2), held('c', undefined, 3)], {
      ...fifo,
      fifo: false,
    });
    expect(chains.map((c) => [c.keys, ids(c.entries)])).toEqual([
      [[], ['b', 'c']],
      [[], ['a']],
    ]);
  });

  it('batch: one chain over all groups, unless a message is redelivered', () => {
    const batch = { ...fifo, batch: true };
    const chains = planChains([held('a', 'g1'), held('b', 'g2')], batch);
    expect(chains.map((c) => [c.keys, ids(c.entries), c.batch])).toEqual([
      [['g:g1', 'g:g2'], ['a', 'b'], true],
    ]);
    const again = planChains([held('a', 'g1'), held('b', 'g2', 2)], batch);
    expect(again.map((c) => c.batch)).toEqual([false, false]);
  });

  it('batch with keyOf: a chain holds its messages’ keys beside their groups, also message by message', () => {
    const standard = { fifo: false, batch: true };
    const chains = planChains(
      [
        held('a', undefined, 1, 'acct-1'),
        held('b', undefined, 1, 'acct-2'),
        held('c', undefined, 1, 'acct-1'),
      ],
      standard,
    );
    expect(chains.map((c) => [c.keys, ids(c.entries), c.batch])).toEqual([
      [['k:acct-1', 'k:acct-2'], ['a', 'b', 'c'], true],
    ]);
    // A key and a group of the same name are different keys.
    const fifo = planChains([held('a', 'x', 1, 'x'), held('b', 'y', 1)], { fifo: true, batch: true });
    expect(fifo.map((c) => c.keys)).toEqual([['g:x', 'k:x', 'g:y']]);
    // A redelivered message in the receive: chains message by message, each still keyed.
    const split = planChains(
      [held('a', undefined, 1, 'acct-1'), held('b', undefined, 2, 'acct-2'), held('c', undefined, 1)],
      standard,
    );
    expect(split.map((c) => [c.keys, ids(c.entries), c.batch])).toEqual([
      [['k:acct-2'], ['b'], false],
      [['k:acct-1'], ['a'], false],
      [[], ['c'], false],
    ]);
  });
});

/** A context whose inbox answers from a script and whose settler records what it was told. */
function context(answer: (envelopes: Envelope[]) => Outcome[]) {
  const calls: string[][] = [];
  const started: string[] = [];
  const settled: [string, string, (number | undefined)?][] = [];
  const suspects = new Set<string>();
  const errors: string[] = [];
  const notRun: string[][] = [];
  const inbox = {
    options: { retryDelayMs: () => 1000 },
    process: async (e: Envelope, call?: ProcessOptions) => {
      if (call?.starts?.suspect) suspects.add(e.id!);
      calls.push([e.id!]);
      return answer([e])[0]!;
    },
    processBatch: async (es: Envelope[]) => {
      calls.push(es.map((e) => e.id!));
      return answer(es);
    },
    noteStart: async (e: Envelope) => {
      started.push(e.id!);
      return started.filter((id) => id === e.id).length;
    },
    notRun: (es: Envelope[]) => {
      notRun.push(es.map((e) => e.id!));
      return es.map((e) => retry(e, false, 0));
    },
  } as unknown as Inbox;
  const settler = {
    planOf: (o: Outcome) => settlePlanOf(o, { consumer: 'c', recordFailed: true }),
    settle: (e: Held, plan: SettlePlan) => {
      const action =
        plan.kind === 'rerun' ? 'retry' : plan.kind === 'dead-letter' ? 'dead-letter' : plan.kind;
      settled.push([e.envelope.id!, action, plan.kind === 'retry' ? plan.delayMs : undefined]);
      return undefined;
    },
    delay: (e: Held, ms: number, purpose: string) => settled.push([e.envelope.id!, purpose, ms]),
    flush: () => {},
  } as unknown as Settler;
  const ctx: ChainContext<unknown> = {
    inbox,
    limiter: new Limiter(4),
    gate: new Gate(),
    settler,
    starts: {
      fresh: { starts: { suspect: false, attemptIsStarts: true } },
      suspect: { starts: { suspect: true, attemptIsStarts: true } },
    },
    logger: { debug() {}, info() {}, warn() {}, error() {} },
    forget: (e) => settled.push([e.envelope.id!, 'forget']),
    noteError: (where) => errors.push(where),
  };
  return { ctx, calls, settled, started, suspects, errors, notRun };
}
const processed = (e: Envelope): Outcome => ({
  status: 'processed',
  id: e.id!,
  envelope: e,
  result: undefined,
});
const retry = (e: Envelope, ran: boolean | 'unavailable', delayMs = 500): Outcome =>
  ran === true
    ? { status: 'retry', id: e.id, envelope: e, error: { name: 'E', message: 'x' }, delayMs, spent: true }
    : {
        status: 'not-run',
        id: e.id,
        envelope: e,
        why: ran === 'unavailable' ? 'unavailable' : 'behind',
        error: { name: 'E', message: 'x' },
        delayMs,
      };

describe('runChain', () => {
  it('stops at a retry and sends the rest of the group back behind it with the same delay, reported not run', async () => {
    const { ctx, settled, notRun } = context((es) =>
      es.map((e) => (e.id === 'b' ? retry(e, true) : processed(e))),
    );
    await runChain(ctx, [held('a', 'g'), held('b', 'g'), held('c', 'g'), held('d', 'g')]);
    expect(settled).toEqual([
      ['a', 'ack', undefined],
      ['b', 'retry', 500],
      ['c', 'retry', 500],
      ['d', 'retry', 500],
    ]);
    expect(notRun).toEqual([['c', 'd']]);
  });

  it("builds no outcome when the inbox throws: reports it and sends the group back after core's delay", async () => {
    const { ctx, settled, errors } = context(() => {
      throw new Error('bug');
    });
    await runChain(ctx, [held('a', 'g'), held('b', 'g')]);
    expect(errors).toEqual(['inbox']);
    expect(settled).toEqual([
      ['a', 'retry', 1000],
      ['b', 'retry', 1000],
    ]);
  });

  it('lets a capped message and all behind it go without running them', async () => {
    const { ctx, calls, settled } = context((es) => es.map(processed));
    const es = [held('a', 'g'), held('b', 'g'), held('c', 'g')];
    es[1]!.capped = true;
    await runChain(ctx, es);
    expect(calls).toEqual([['a']]);
    expect(settled).toEqual([
      ['a', 'ack', undefined],
      ['b', 'forget'],
      ['c', 'release', 0],
    ]);
  });
});

describe('redelivered messages', () => {
  it('run alone across chains (nothing beside them), each as a suspect whose start the inbox counts', async () => {
    let running = 0;
    let overlapped = false;
    const { ctx, started, calls, suspects } = context((es) => es.map(processed));
    const slow = ctx.inbox.process.bind(ctx.inbox);
    const alone = new Set<string>();
    ctx.inbox.process = async (e: Envelope, call?: ProcessOptions) => {
      running++;
      if (e.redelivered) alone.add(e.id!);
      if (running > 1 && [...alone].length > 0) overlapped = true;
      await new Promise((r) => setTimeout(r, 10));
      if (e.redelivered) alone.delete(e.id!);
      running--;
      return slow(e, call);
    };
    const [a, b, c, d] = [held('a', 'g1', 2), held('b', 'g2', 2), held('c', 'g3'), held('d', 'g4')];
    await Promise.all([runChain(ctx, [c]), runChain(ctx, [a]), runChain(ctx, [b]), runChain(ctx, [d])]);
    // Counted by the inbox once it claimed them (the suspect call options), not by the chain.
    expect(started).toEqual([]);
    expect([...suspects].sort()).toEqual(['a', 'b']);
    expect(calls.flat().sort()).toEqual(['a', 'b', 'c', 'd']);
    // a redelivered message never runs beside anything, though the chains run in parallel
    expect(overlapped).toBe(false);
  });
});

describe('runBatch', () => {
  it('a retry holds only its own group: other groups not run go into another transaction', async () => {
    let first = true;
    const { ctx, calls, settled } = context((es) => {
      if (!first) return es.map(processed);
      first = false;
      // core stops at b and returns everything after it not run
      const at = es.findIndex((e) => e.id === 'b');
      return es.map((e, i) => (i < at ? processed(e) : i === at ? retry(e, true) : retry(e, false)));
    });
    await runBatch(ctx, [
      held('a', 'g1'),
      held('b', 'g2'),
      held('c', 'g1'),
      held('d', 'g2'),
      held('e', 'g3'),
    ]);
    expect(calls).toEqual([
      ['a', 'b', 'c', 'd', 'e'],
      ['c', 'e'],
    ]);
    expect(settled.sort()).toEqual(
      [
        ['a', 'ack', undefined],
        ['b', 'retry', 500],
        ['d', 'retry', 500],
        ['c', 'ack', undefined],
        ['e', 'ack', undefined],
      ].sort(),
    );
  });

  it('a stop that ran nothing (database down) sends everything back', async () => {
    const { ctx, calls, settled } = context((es) => es.map((e) => retry(e, 'unavailable', 250)));
    await runBatch(ctx, [held('a', 'g1'), held('b', 'g2')]);
    expect(calls).toHaveLength(1);
    expect(settled).toEqual([
      ['a', 'retry', 250],
      ['b', 'retry', 250],
    ]);
  });
});
