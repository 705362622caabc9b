import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import {
  createInbox,
  type Envelope,
  type Handler,
  type InboxOptions,
  PermanentError,
} from '../../src/index.js';
import { envelope } from './fixtures/db.js';

// `recordFailed: false`: where the inbox would write a `failed` row (a permanent error, attempts
// exhausted, a lease-mode step mistake, a throwing fingerprintOf), it writes nothing, gives the
// claim back, and answers `failed` as before; a later delivery of the id runs the handler again.

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_no_failed', 8);
});
afterAll(async () => {
  await db?.close();
});

let seq = 0;
const rowOf = async (consumer: string, id: string) =>
  (
    await db.pool.query(
      `SELECT status, owner FROM ${db.schema}.inbox WHERE consumer = $1 AND message_id = $2`,
      [consumer, id],
    )
  ).rows[0] as { status: string; owner: string | null } | undefined;
const write: Handler = async (e, { tx }) => {
  await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
};

/** A handler that fails permanently while `broken` says so, then writes its effect. */
function fixable(fail: (e: Envelope, ctx: Parameters<Handler>[1]) => Promise<void>) {
  const state = { broken: true, runs: 0 };
  const handler: Handler = async (e, ctx) => {
    state.runs++;
    if (state.broken) return fail(e, ctx);
    await write(e, ctx);
  };
  return { state, handler };
}

const inbox = (patch: Partial<InboxOptions>) =>
  createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: `no-failed-${++seq}`,
    recordFailed: false,
    retryDelayMs: () => 0,
    logger: false,
    handler: write,
    ...patch,
  });

describe('recordFailed: false, transaction mode', () => {
  it('a PermanentError is `failed` with no row; the redelivery runs again', async () => {
    const f = fixable(async () => {
      throw new PermanentError('bad payload');
    });
    const ib = inbox({ handler: f.handler });
    const first = await ib.process(envelope('tx-1'));
    expect(first).toMatchObject({ status: 'failed', reason: 'permanent' });
    expect(await rowOf(ib.consumer, 'tx-1')).toBeUndefined();
    f.state.broken = false;
    const again = await ib.process(envelope('tx-1', { redelivered: true, attempt: 2 }));
    expect(again.status).toBe('processed');
    expect((await db.counts()).get('tx-1')).toBe(1);
  });

  it('attempts exhausted is `failed` with no row', async () => {
    const ib = inbox({
      maxAttempts: 2,
      handler: async () => {
        throw new Error('flaky');
      },
    });
    const out = await ib.process(envelope('tx-2', { redelivered: true, attempt: 2 }));
    expect(out).toMatchObject({ status: 'failed', reason: 'max-attempts' });
    expect(await rowOf(ib.consumer, 'tx-2')).toBeUndefined();
  });

  it('a savepoint batch leaves no claim for the failed message and commits its neighbours', async () => {
    const ib = inbox({
      batchMode: 'savepoint',
      handler: async (e, ctx) => {
        if (e.id === 'sp-2') throw new PermanentError('poison');
        await write(e, ctx);
      },
    });
    const out = await ib.processBatch(['sp-1', 'sp-2', 'sp-3'].map((id) => envelope(id)));
    expect(out.map((o) => o.status)).toEqual(['processed', 'failed', 'processed']);
    expect(await rowOf(ib.consumer, 'sp-2')).toBeUndefined();
    expect((await rowOf(ib.consumer, 'sp-1'))?.status).toBe('done');
    expect((await rowOf(ib.consumer, 'sp-3'))?.status).toBe('done');
  });

  it('an optimistic batch leaves no claim for the failed message', async () => {
    const ib = inbox({
      handler: async (e, ctx) => {
        if (e.id === 'op-2') throw new PermanentError('poison');
        await write(e, ctx);
      },
    });
    const out = await ib.processBatch(['op-1', 'op-2', 'op-3'].map((id) => envelope(id)));
    expect(out.map((o) => o.status)).toEqual(['processed', 'failed', 'processed']);
    expect(await rowOf(ib.consumer, 'op-2')).toBeUndefined();
  });

  it('a throwing fingerprintOf is `failed` with no row', async () => {
    const ib = inbox({
      fingerprintOf: () => {
        throw new Error('no amount');
      },
    });
    const out = await ib.process(envelope('fp-1'));
    expect(out).toMatchObject({ status: 'failed', reason: 'permanent' });
    expect(await rowOf(ib.consumer, 'fp-1')).toBeUndefined();
  });
});

describe('recordFailed: false, lease mode', () => {
  const lease = (patch: Partial<InboxOptions>) => inbox({ mode: { lease: { leaseMs: 2_000 } }, ...patch });

  it('a step mistake is `failed` with the row given back; the redelivery after the fix takes over and reuses recorded steps', async () => {
    let charges = 0;
    const charge = async () => {
      charges++;
      return 'ch_1';
    };
    const f = fixable(async (_e, ctx) => {
      await ctx.step('charge', charge);
      await ctx.step('charge', charge); // STEP_NAME_REUSED
    });
    const ib = lease({
      handler: async (e, ctx) => {
        if (!f.state.broken) await ctx.step('charge', charge);
        return f.handler(e, ctx);
      },
    });
    const first = await ib.process(envelope('l-1'));
    expect(first).toMatchObject({ status: 'failed', reason: 'permanent' });
    expect(await rowOf(ib.consumer, 'l-1')).toEqual({ status: 'in_progress', owner: null });
    f.state.broken = false;
    const again = await ib.process(envelope('l-1', { redelivered: true, attempt: 2 }));
    expect(again.status).toBe('processed');
    expect(charges).toBe(1);
    expect((await rowOf(ib.consumer, 'l-1'))?.status).toBe('done');
  });

  it('a PermanentError is `failed` with the row given back', async () => {
    const ib = lease({
      handler: async () => {
        throw new PermanentError('no');
      },
    });
    expect(await ib.process(envelope('l-2'))).toMatchObject({ status: 'failed', reason: 'permanent' });
    expect(await rowOf(ib.consumer, 'l-2')).toEqual({ status: 'in_progress', owner: null });
  });

  it('claims beyond maxAttempts still run the handler instead of being given up on', async () => {
    let runs = 0;
    const ib = lease({
      maxAttempts: 1,
      mode: { lease: { leaseMs: 300 } },
      handlerTimeoutMs: 20,
      handler: async (e, ctx) => {
        runs++;
        if (runs === 1) await new Promise(() => {}); // past the deadline: keeps its lease until it runs out
        await write(e, ctx);
      },
    });
    const first = await ib.process(envelope('l-3'));
    expect(first.status === 'retry' || first.status === 'failed').toBe(true);
    let again = await ib.process(envelope('l-3', { redelivered: true, attempt: 2 }));
    for (let i = 0; i < 100 && again.status === 'busy'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      again = await ib.process(envelope('l-3', { redelivered: true, attempt: 2 }));
    }
    expect(again.status).toBe('processed');
    // At least once more (a loaded machine may lose a lease and run it a third time), never given up on.
    expect(runs).toBeGreaterThanOrEqual(2);
    expect(await rowOf(ib.consumer, 'l-3')).toMatchObject({ status: 'done' });
  });

  it('is refused with a name when not a boolean', () => {
    expect(() => inbox({ recordFailed: 'no' as never })).toThrow(/recordFailed/);
  });
});
