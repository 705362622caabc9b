import { describe, expect, it } from 'vitest';
import { DeliveryPipeline, Gate, processGroup, type SettlePlan } from '../../src/adapter/index.js';
import type { ProcessOptions } from '../../src/engine/process-options.js';
import type { Envelope } from '../../src/message/envelope.js';
import type { Outcome } from '../../src/message/outcome.js';

const tick = () => new Promise((r) => setTimeout(r, 0));

const env = (id: string, redelivered = false): Envelope => ({
  id,
  body: Buffer.from(id),
  headers: {},
  key: undefined,
  source: { broker: 'test', queue: 'q' },
  attempt: 1,
  redelivered,
});

/**
 * An inbox whose batches stop at `stopAt` (that one retried, the rest behind it not run), and
 * which throws for an envelope named `boom`.
 */
function fakeInbox(log: string[], stopAt?: string) {
  let stopped = false;
  const outcome = (e: Envelope): Outcome => {
    if (e.id === stopAt && !stopped) {
      stopped = true;
      return { status: 'retry', id: e.id, envelope: e, delayMs: 50, spent: true } as never;
    }
    return { status: 'processed', id: e.id, envelope: e } as never;
  };
  return {
    async process(e: Envelope, call?: ProcessOptions) {
      log.push(`process ${e.id}${call?.starts?.suspect ? ' (suspect)' : ''}`);
      if (e.id === 'boom') throw new Error('inbox bug');
      return outcome(e);
    },
    async processBatch(es: readonly Envelope[]) {
      log.push(`batch ${es.map((e) => e.id).join(',')}`);
      const out: Outcome[] = [];
      for (const e of es) {
        if (out.some((o) => o.status === 'retry')) {
          out.push({ status: 'not-run', why: 'behind', id: e.id, envelope: e, delayMs: 0 } as never);
        } else out.push(outcome(e));
      }
      return out;
    },
  };
}

function pipeline(log: string[], opts: { batchSize: number; concurrency?: number; stopAt?: string }) {
  const settled: string[] = [];
  const handedBack: string[] = [];
  const errors: string[] = [];
  const p = new DeliveryPipeline<Envelope>({
    inbox: fakeInbox(log, opts.stopAt),
    starts: { fresh: undefined, suspect: { starts: { suspect: true } } },
    settleContext: { consumer: 'c', recordFailed: true },
    concurrency: opts.concurrency ?? 1,
    batchSize: opts.batchSize,
    gate: new Gate(),
    envelope: (e) => e,
    settle: async (e, plan: SettlePlan) => {
      settled.push(`${e.id}:${plan.kind}`);
    },
    handBack: (es) => {
      handedBack.push(...es.map((e) => String(e.id)));
    },
    onError: (where) => errors.push(where),
  });
  return { p, settled, handedBack, errors };
}

describe('DeliveryPipeline', () => {
  it('groups fresh deliveries up to batchSize, a redelivered one alone as a suspect, in order', async () => {
    const log: string[] = [];
    const { p, settled } = pipeline(log, { batchSize: 2 });
    for (const e of [env('a'), env('b'), env('c'), env('r', true), env('d')]) p.push(e);
    p.pump();
    await p.idle();
    expect(log).toEqual(['batch a,b', 'process c', 'process r (suspect)', 'process d']);
    expect(settled).toEqual(['a:ack', 'b:ack', 'c:ack', 'r:ack', 'd:ack']);
  });

  it('settles the stopped delivery with its plan and runs the ones behind it again at once', async () => {
    const log: string[] = [];
    const { p, settled } = pipeline(log, { batchSize: 3, stopAt: 'b' });
    for (const e of [env('a'), env('b'), env('c')]) p.push(e);
    p.pump();
    await p.idle();
    expect(log).toEqual(['batch a,b,c', 'process c']);
    expect(settled).toEqual(['a:ack', 'b:retry', 'c:ack']);
  });

  it('hands a group back when the inbox throws, and runs at most `concurrency` groups', async () => {
    const log: string[] = [];
    const { p, handedBack, errors } = pipeline(log, { batchSize: 1, concurrency: 2 });
    for (const e of [env('boom'), env('x'), env('y')]) p.push(e);
    p.pump();
    expect(p.active).toBe(2);
    expect(p.queued).toBe(1);
    await p.idle();
    expect(handedBack).toEqual(['boom']);
    expect(errors).toEqual(['inbox']);
  });

  it('close() drops what is queued, runs nothing more, and lets idle() resolve', async () => {
    const log: string[] = [];
    const { p, settled } = pipeline(log, { batchSize: 1 });
    for (const e of [env('a'), env('b')]) p.push(e);
    p.pump();
    const idle = p.idle();
    p.close();
    await idle;
    await tick();
    expect(log).toEqual(['process a']);
    expect(p.queued).toBe(0);
    p.push(env('c'));
    p.pump();
    expect(p.queued).toBe(0);
    expect(settled).toEqual(['a:ack']);
  });

  it('with linger, a short batch waits while more is on its way; pump(true) starts it', async () => {
    const log: string[] = [];
    let more = true;
    const p = new DeliveryPipeline<Envelope>({
      inbox: fakeInbox(log),
      starts: { fresh: undefined, suspect: {} },
      settleContext: { consumer: 'c', recordFailed: true },
      concurrency: 1,
      batchSize: 3,
      gate: new Gate(),
      envelope: (e) => e,
      settle: async () => {},
      handBack: () => {},
      onError: () => {},
      linger: { ms: 60_000, more: () => more },
    });
    p.push(env('a'));
    p.pump();
    await tick();
    expect(log).toEqual([]);
    p.push(env('b'));
    more = false;
    p.pump(true);
    await p.idle();
    expect(log).toEqual(['batch a,b']);
  });

  it('ends a group only once a settle that waits has resolved; one that returns nothing is done at once', async () => {
    const log: string[] = [];
    let release!: () => void;
    const waiting = new Promise<void>((r) => {
      release = r;
    });
    const settled: string[] = [];
    const p = new DeliveryPipeline<Envelope>({
      inbox: fakeInbox(log, 'b'),
      starts: { fresh: undefined, suspect: {} },
      settleContext: { consumer: 'c', recordFailed: true },
      concurrency: 1,
      batchSize: 1,
      gate: new Gate(),
      envelope: (e) => e,
      // An ack is settled at once (no promise); a retry waits for the broker.
      settle: (e, plan) => {
        settled.push(`${e.id}:${plan.kind}`);
        return plan.kind === 'ack' ? undefined : waiting;
      },
      handBack: () => {},
      onError: () => {},
    });
    for (const e of [env('a'), env('b'), env('c')]) p.push(e);
    p.pump();
    await tick();
    // a acked, b's republish still waiting: c has not started (concurrency 1).
    expect(settled).toEqual(['a:ack', 'b:retry']);
    expect(p.active).toBe(1);
    expect(log).toEqual(['process a', 'process b']);
    release();
    await p.idle();
    expect(settled).toEqual(['a:ack', 'b:retry', 'c:ack']);
  });

  it('runs a lone delivery whose plan is rerun again at once, ahead of what waits', async () => {
    const log: string[] = [];
    let first = true;
    const settled: string[] = [];
    const p = new DeliveryPipeline<Envelope>({
      inbox: {
        async process(e: Envelope) {
          log.push(`process ${e.id}`);
          if (e.id === 'a' && first) {
            first = false;
            return { status: 'not-run', why: 'behind', id: e.id, envelope: e, delayMs: 0 } as never;
          }
          return { status: 'processed', id: e.id, envelope: e } as never;
        },
        processBatch: async () => [],
      },
      starts: { fresh: undefined, suspect: {} },
      settleContext: { consumer: 'c', recordFailed: true },
      concurrency: 1,
      batchSize: 1,
      gate: new Gate(),
      envelope: (e) => e,
      settle: (e, plan) => {
        settled.push(`${e.id}:${plan.kind}`);
        return undefined;
      },
      handBack: () => {},
      onError: () => {},
    });
    for (const e of [env('a'), env('b')]) p.push(e);
    p.pump();
    await p.idle();
    expect(log).toEqual(['process a', 'process a', 'process b']);
    expect(settled).toEqual(['a:ack', 'b:ack']);
  });

  it('holds a fresh group back while a suspect holds the gate exclusive', async () => {
    const log: string[] = [];
    const gate = new Gate();
    const { p } = pipelineOn(gate, log);
    const leave = await gate.exclusive();
    p.push(env('a'));
    p.pump();
    await tick();
    expect(log).toEqual([]);
    leave();
    await p.idle();
    expect(log).toEqual(['process a']);
  });
});

describe('processGroup', () => {
  it('works with a gate that has no tryShared (one made by an older copy of @once/core)', async () => {
    const log: string[] = [];
    const gate = new Gate();
    let entered = 0;
    const old = {
      shared: async () => {
        entered++;
        return gate.shared();
      },
      exclusive: () => gate.exclusive(),
    } as unknown as Gate;
    const out = await processGroup(
      { inbox: fakeInbox(log), gate: old, starts: { fresh: undefined, suspect: {} } },
      [env('a')],
      false,
    );
    expect(out.map((o) => o.status)).toEqual(['processed']);
    expect(entered).toBe(1);
    // The gate was left: an exclusive holder gets in.
    (await gate.exclusive())();
  });
});

function pipelineOn(gate: Gate, log: string[]) {
  const p = new DeliveryPipeline<Envelope>({
    inbox: fakeInbox(log),
    starts: { fresh: undefined, suspect: {} },
    settleContext: { consumer: 'c', recordFailed: true },
    concurrency: 1,
    batchSize: 1,
    gate,
    envelope: (e) => e,
    settle: () => undefined,
    handBack: () => {},
    onError: () => {},
  });
  return { p };
}
