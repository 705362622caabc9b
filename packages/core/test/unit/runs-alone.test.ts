import { describe, expect, it } from 'vitest';
import { DeliveryPipeline, Gate, runsAlone } from '../../src/adapter/index.js';
import type { Prepared } from '../../src/engine/item.js';
import { isFresh, planRuns } from '../../src/engine/plan-runs.js';
import type { ProcessOptions } from '../../src/engine/process-options.js';
import type { Envelope } from '../../src/message/envelope.js';

// One predicate for "runs alone": the engine's planRuns (one message per transaction) and the
// kit's pipeline (alone in the process, its start counted) must agree on every delivery.

const cases: [redelivered: boolean, attempt: number][] = [
  [false, 1],
  [true, 1],
  [false, 2],
  [true, 3],
  [false, 7],
];

const env = (id: string, redelivered: boolean, attempt: number): Envelope => ({
  id,
  body: Buffer.from(id),
  headers: {},
  source: { broker: 'test', queue: 'q' },
  attempt,
  redelivered,
});

/** Whether planRuns, batching, gives the middle one of three deliveries a run of its own. */
function aloneInPlan(e: Envelope): boolean {
  const item = (x: Envelope): Prepared => ({
    kind: 'item',
    item: { envelope: x, id: String(x.id), fpHex: '00' as never, handler: undefined, starts: undefined },
  });
  const runs = planRuns([item(env('a', false, 1)), item(e), item(env('b', false, 1))], true);
  return runs.some((r) => r.kind === 'one' && r.item.envelope === e);
}

/** Whether the pipeline, batching, runs the middle one of three deliveries alone as a suspect. */
async function aloneInPipeline(e: Envelope): Promise<boolean> {
  const groups: { ids: string[]; suspect: boolean }[] = [];
  const inbox = {
    async process(x: Envelope, call?: ProcessOptions) {
      groups.push({ ids: [String(x.id)], suspect: call?.starts?.suspect === true });
      return { status: 'processed', id: x.id, envelope: x } as never;
    },
    async processBatch(xs: readonly Envelope[], call?: ProcessOptions) {
      groups.push({ ids: xs.map((x) => String(x.id)), suspect: call?.starts?.suspect === true });
      return xs.map((x) => ({ status: 'processed', id: x.id, envelope: x }) as never);
    },
  };
  const p = new DeliveryPipeline<Envelope>({
    inbox,
    starts: { fresh: undefined, suspect: { starts: { suspect: true } } },
    settleContext: { consumer: 'c', recordFailed: true },
    concurrency: 1,
    batchSize: 10,
    gate: new Gate(),
    envelope: (x) => x,
    settle: () => undefined,
    handBack: () => {},
    onError: () => {},
  });
  for (const x of [env('a', false, 1), e, env('b', false, 1)]) p.push(x);
  p.pump();
  await p.idle();
  const own = groups.find((g) => g.ids.includes(String(e.id)))!;
  return own.ids.length === 1 && own.suspect;
}

describe('runsAlone', () => {
  it.each(cases)(
    'redelivered %s, attempt %i: planRuns and the pipeline agree',
    async (redelivered, attempt) => {
      const e = env('m', redelivered, attempt);
      const alone = runsAlone(redelivered, attempt);
      expect(isFresh(e)).toBe(!alone);
      expect(aloneInPlan(e)).toBe(alone);
      expect(await aloneInPipeline(e)).toBe(alone);
    },
  );

  it('a retry delivered as a new message (attempt 2, not redelivered) runs alone', () => {
    expect(runsAlone(false, 2)).toBe(true);
    expect(runsAlone(false, 1)).toBe(false);
  });
});
