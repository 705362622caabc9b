import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { DeliveryPipeline, Gate, type StartBudgets } from '../../src/adapter/index.js';
import { createInbox, type Envelope, type Handler, type ProcessOptions } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

// The killer budget in the engine (ProcessOptions.starts): counted in PostgreSQL once the id is
// claimed and just before the handler runs, refused past maxAttempts by the engine's own verdict,
// taken back for an unspent retry; envelopes are never written.

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_start_budget', 6);
});
afterAll(async () => {
  await db.close();
});

async function startsOf(consumer: string, id: string): Promise<number | undefined> {
  const { rows } = await db.pool.query<{ starts: number }>(
    `SELECT starts FROM ${db.schema}.starts WHERE consumer = $1 AND message_id = $2`,
    [consumer, id],
  );
  return rows[0]?.starts;
}

async function statusOf(consumer: string, id: string): Promise<{ status: string } | undefined> {
  const { rows } = await db.pool.query<{ status: string }>(
    `SELECT status FROM ${db.schema}.inbox WHERE consumer = $1 AND message_id = $2`,
    [consumer, id],
  );
  return rows[0];
}

/** Freezes an envelope and everything in it (its body's bytes cannot be frozen, only replaced). */
function deepFreeze(e: Envelope): Envelope {
  Object.freeze(e.source);
  Object.freeze(e.headers);
  return Object.freeze(e);
}

/** A copy to compare with after a call: the fields a write could change. */
function snapshot(e: Envelope): unknown {
  return { ...e, body: e.body.toString('base64'), source: { ...e.source }, headers: { ...e.headers } };
}

function inbox(consumer: string, handler: Handler, maxAttempts = 2) {
  return createInbox({ pool: db.pool, schema: db.schema, consumer, handler, maxAttempts });
}

/** A deadlock the handler meets: a fault of the environment, so its retry is not spent. */
function deadlock(): Error {
  return Object.assign(new Error('deadlock detected'), { code: '40P01' });
}

describe('ProcessOptions.starts', () => {
  it('counts a suspect before its handler, never a fresh one, and refuses it past maxAttempts', async () => {
    let ran = 0;
    const refused: number[] = [];
    const ib = inbox('sb-refuse', () => {
      ran++;
      throw new Error('boom');
    });
    const suspect: ProcessOptions = {
      starts: { suspect: true, onExhausted: (_e, starts) => refused.push(starts) },
    };
    // A fresh delivery is not counted.
    const fresh = await ib.process(deepFreeze(envelope('sb-f')), { starts: { suspect: false } });
    expect(fresh.status).toBe('retry');
    expect(await startsOf('sb-refuse', 'sb-f')).toBeUndefined();
    // A suspect that keeps "killing" the consumer: each redelivery is counted.
    const m = () => deepFreeze(envelope('sb-k', { attempt: 1, redelivered: true }));
    expect((await ib.process(m(), suspect)).status).toBe('retry');
    expect(await startsOf('sb-refuse', 'sb-k')).toBe(1);
    expect((await ib.process(m(), suspect)).status).toBe('retry');
    expect(await startsOf('sb-refuse', 'sb-k')).toBe(2);
    expect(ran).toBe(3);
    // The third start is past maxAttempts (2): refused by the engine, the handler not run.
    const third = await ib.process(m(), suspect);
    expect(third).toMatchObject({
      status: 'failed',
      reason: 'max-attempts',
      error: { code: 'ATTEMPTS_EXHAUSTED' },
    });
    expect(ran).toBe(3);
    expect(refused).toEqual([3]);
    expect(await statusOf('sb-refuse', 'sb-k')).toEqual({ status: 'failed' });
  });

  it('spends nothing for a redelivery that ends duplicate', async () => {
    const ib = inbox('sb-dup', () => 'ok');
    const suspect: ProcessOptions = { starts: { suspect: true } };
    const first = await ib.process(deepFreeze(envelope('sb-d', { redelivered: true })), suspect);
    expect(first.status).toBe('processed');
    expect(await startsOf('sb-dup', 'sb-d')).toBe(1);
    const again = await ib.process(deepFreeze(envelope('sb-d', { redelivered: true })), suspect);
    expect(again.status).toBe('duplicate');
    expect(await startsOf('sb-dup', 'sb-d')).toBe(1);
  });

  it('without attemptIsStarts, judges by the delivered attempt and counts every run', async () => {
    const ib = inbox(
      'sb-plain',
      () => {
        throw new Error('boom');
      },
      5,
    );
    // Delivered as attempt 5 of 5: the delivered attempt ends it, the one start does not matter.
    const o = await ib.process(deepFreeze(envelope('sb-p', { attempt: 5, redelivered: true })), {
      starts: { suspect: true },
    });
    expect(o).toMatchObject({ status: 'failed', reason: 'max-attempts' });
    expect(await startsOf('sb-plain', 'sb-p')).toBe(1);
  });

  describe('attemptIsStarts', () => {
    const suspect: ProcessOptions = { starts: { suspect: true, attemptIsStarts: true } };
    const fresh: ProcessOptions = { starts: { suspect: false, attemptIsStarts: true } };

    it('judges by the counted starts, not the receive count, and leaves the envelope as delivered', async () => {
      const seen: number[] = [];
      const ib = inbox(
        'sb-ais',
        (_e, ctx) => {
          seen.push(ctx.attempt);
          throw new Error('boom');
        },
        5,
      );
      // Received 7 times (SQS counts receives), started once: a spent retry, not max-attempts.
      const e = deepFreeze(envelope('sb-a', { attempt: 7, redelivered: true }));
      const before = snapshot(e);
      const o = await ib.process(e, suspect);
      expect(o).toMatchObject({ status: 'retry', spent: true, attempt: 1 });
      // The handler's context and the outcome carry the attempt judged; the envelope its own.
      expect(seen).toEqual([1]);
      expect(await startsOf('sb-ais', 'sb-a')).toBe(1);
      expect(snapshot(e)).toEqual(before);
      expect(e.attempt).toBe(7);
    });

    it('counts a run once however often the inbox runs it, and takes it back when the retry is not spent', async () => {
      let ran = 0;
      const ib = inbox(
        'sb-unspent',
        () => {
          ran++;
          throw deadlock();
        },
        5,
      );
      const o = await ib.process(deepFreeze(envelope('sb-u', { attempt: 2, redelivered: true })), suspect);
      expect(o).toMatchObject({ status: 'retry', spent: false });
      // A deadlock is a race lost: the inbox ran it again at once, counted once, then took it back.
      expect(ran).toBeGreaterThan(1);
      expect(await startsOf('sb-unspent', 'sb-u')).toBe(0);
    });

    it('counts a fresh delivery after a spent retry, in process and processBatch', async () => {
      const ib = inbox(
        'sb-fresh',
        (e) => {
          if (e.id !== 'sb-ok') throw new Error('boom');
        },
        5,
      );
      expect((await ib.process(deepFreeze(envelope('sb-1')), fresh)).status).toBe('retry');
      expect(await startsOf('sb-fresh', 'sb-1')).toBe(1);
      const batch = [
        deepFreeze(envelope('sb-ok')),
        deepFreeze(envelope('sb-2')),
        deepFreeze(envelope('sb-3')),
      ];
      const before = batch.map(snapshot);
      const outcomes = await ib.processBatch(batch, fresh);
      expect(outcomes.map((o) => o.status)).toEqual(['processed', 'retry', 'not-run']);
      expect(await startsOf('sb-fresh', 'sb-ok')).toBeUndefined();
      expect(await startsOf('sb-fresh', 'sb-2')).toBe(1);
      expect(await startsOf('sb-fresh', 'sb-3')).toBeUndefined();
      expect(batch.map(snapshot)).toEqual(before);
    });
  });

  it('runs suspects of a processBatch one per transaction, each counted', async () => {
    const ib = inbox('sb-batch', () => 'ok');
    const batch = [deepFreeze(envelope('sb-b1')), deepFreeze(envelope('sb-b2'))];
    const outcomes = await ib.processBatch(batch, { starts: { suspect: true } });
    expect(outcomes.map((o) => o.status)).toEqual(['processed', 'processed']);
    expect(await startsOf('sb-batch', 'sb-b1')).toBe(1);
    expect(await startsOf('sb-batch', 'sb-b2')).toBe(1);
  });
});

describe('ProcessOptions.handler', () => {
  it("runs the call's handler instead of the inbox's", async () => {
    const ib = inbox('sb-handler', () => 'inbox');
    const o = await ib.process(deepFreeze(envelope('sb-h')), { handler: () => 'call' });
    expect(o).toMatchObject({ status: 'processed', result: 'call' });
    const [b1, b2] = await ib.processBatch([deepFreeze(envelope('sb-h1')), deepFreeze(envelope('sb-h2'))], {
      handler: (e) => `call ${e.id}`,
    });
    expect([b1?.status, b2?.status]).toEqual(['processed', 'processed']);
    expect((await ib.process(deepFreeze(envelope('sb-h3')))) as unknown).toMatchObject({ result: 'inbox' });
  });
});

describe('frozen envelopes', () => {
  it('go through process, processBatch and the adapter kit pipeline without a write', async () => {
    let fail = true;
    const ib = inbox(
      'sb-frozen',
      (e) => {
        if (e.id === 'fz-retry' && fail) {
          fail = false;
          throw new Error('once');
        }
        return e.id;
      },
      5,
    );
    const all: Envelope[] = [];
    const make = (id: string, patch: Partial<Envelope> = {}) => {
      const e = deepFreeze(envelope(id, { headers: { h: 'v' }, ...patch }));
      all.push(e);
      return e;
    };
    // Module code runs in strict mode: a write to a frozen object throws, and the inbox would
    // answer with an outcome other than these.
    expect(Object.isFrozen(make('fz-probe'))).toBe(true);
    const before = new Map<Envelope, unknown>();
    const fresh: ProcessOptions = { starts: { suspect: false, attemptIsStarts: true } };
    const suspect: ProcessOptions = { starts: { suspect: true, attemptIsStarts: true } };
    const single = make('fz-1', { attempt: 3, redelivered: true });
    const batch = [make('fz-2'), make('fz-retry'), make('fz-3')];
    const kit = [make('fz-4'), make('fz-5', { attempt: 4, redelivered: true }), make('fz-6')];
    for (const e of all) before.set(e, snapshot(e));

    expect((await ib.process(single, suspect)).status).toBe('processed');
    expect((await ib.processBatch(batch, fresh)).map((o) => o.status)).toEqual([
      'processed',
      'retry',
      'not-run',
    ]);

    const settled: string[] = [];
    const starts: StartBudgets<unknown> = { fresh, suspect };
    const pipeline = new DeliveryPipeline<Envelope>({
      inbox: ib,
      starts,
      settleContext: { consumer: 'sb-frozen', recordFailed: true },
      concurrency: 1,
      batchSize: 10,
      gate: new Gate(),
      envelope: (e) => e,
      settle: (e, plan) => {
        settled.push(`${e.id}:${plan.outcome}`);
        return undefined;
      },
      handBack: () => {},
      onError: (where, err) => settled.push(`error ${where}: ${String(err)}`),
    });
    for (const e of kit) pipeline.push(e);
    pipeline.pump();
    await pipeline.idle();
    expect(settled).toEqual(['fz-4:processed', 'fz-5:processed', 'fz-6:processed']);
    expect(await startsOf('sb-frozen', 'fz-5')).toBe(1);
    for (const e of all) {
      expect(Object.isFrozen(e)).toBe(true);
      expect(snapshot(e)).toEqual(before.get(e));
    }
  });
});
