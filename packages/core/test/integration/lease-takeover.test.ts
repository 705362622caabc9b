import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { quoteIdentifier } from '../../src/admin/index.js';
import {
  createInbox,
  type Envelope,
  type Handler,
  type InboxOptions,
  OnceError,
  type PgPoolLike,
} from '../../src/index.js';
import { leaseSql } from '../../src/sql/lease.js';
import { envelope } from './fixtures/db.js';

// Two workers on one message: a stalled owner, a takeover, and the old owner's late writes.

let db: Awaited<ReturnType<typeof freshDb>>;
let renewSql: string;
let recordSql: string;
beforeAll(async () => {
  db = await freshDb('core_lease_takeover', 8);
  const sql = leaseSql(quoteIdentifier(db.schema));
  renewSql = sql.renew;
  recordSql = sql.recordStep;
});
afterAll(async () => {
  await db?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A promise with its resolver: a point where a test holds a handler. */
function gate<T = void>() {
  let open!: (v: T) => void;
  const promise = new Promise<T>((r) => (open = r));
  return { promise, open };
}

/**
 * A pool through which lease renewals can be stalled (they wait, as from a process that has
 * stopped or lost its network, and run late when released); everything else passes. It also
 * logs the step records it sends.
 */
function stallablePool(pool: PgPoolLike) {
  let held: (() => void)[] | undefined;
  const records: string[] = [];
  // once sends its autocommit statements (renewals, step records) on a connection of the pool,
  // under its statement bound (bounded-pool.ts): the stall sits in the connection's query.
  const stallable = async (text: string, values?: unknown[]) => {
    if (text === renewSql && held) await new Promise<void>((r) => held?.push(r));
    if (text === recordSql) records.push(String(values?.[4]));
  };
  const wrapped: PgPoolLike = {
    async connect() {
      const client = await pool.connect();
      return {
        // biome-ignore lint/suspicious/noExplicitAny: pg's own signature
        async query(text: any, values?: unknown[]) {
          await stallable(text, values);
          return client.query(text, values);
        },
        release: (err?: Error | boolean) => client.release(err),
        on: (e: 'error', l: (err: Error) => void) => client.on?.(e, l),
        off: (e: 'error', l: (err: Error) => void) => client.off?.(e, l),
      };
    },
    async query(text: string, values?: unknown[]) {
      await stallable(text, values);
      return pool.query(text, values);
    },
  };
  return {
    pool: wrapped,
    records,
    stall: () => {
      held = [];
    },
    release: () => {
      const h = held ?? [];
      held = undefined;
      for (const r of h) r();
    },
  };
}

/** Counts calls of each step's "external" effect per worker, as a provider would see them. */
const calls = new Map<string, number>();
const call = (id: string, step: string) => calls.set(`${id}|${step}`, (calls.get(`${id}|${step}`) ?? 0) + 1);
const callsOf = (id: string, step: string) => calls.get(`${id}|${step}`) ?? 0;

function inbox(pool: PgPoolLike, handler: Handler, patch: Partial<InboxOptions> = {}) {
  return createInbox({
    pool,
    schema: db.schema,
    consumer: 'takeover',
    mode: { lease: { leaseMs: 1000, heartbeatMs: 200 } },
    handler,
    ...patch,
  });
}

async function stepRow(id: string, step: string): Promise<unknown> {
  const res = await db.pool.query(
    `SELECT result FROM ${db.schema}.steps WHERE consumer = 'takeover' AND message_id = $1 AND step = $2`,
    [id, step],
  );
  return res.rows[0]?.result;
}

it('a stalled owner loses its lease; the new owner resumes; the old one’s late step record is refused', async () => {
  const id = 'stalled-in-step';
  const s = stallablePool(db.pool);
  const inB = gate();
  const letAFinishB = gate();
  let aStepError: unknown;
  let aSignal: AbortSignal | undefined;
  const handler =
    (who: string): Handler =>
    async (e, ctx) => {
      if (who === 'A') aSignal = ctx.signal;
      await ctx.step('a', () => {
        call(ctx.id, 'a');
        return { by: who };
      });
      try {
        await ctx.step('b', async () => {
          call(ctx.id, 'b');
          if (who === 'A') {
            inB.open();
            await letAFinishB.promise;
          }
          return { by: who };
        });
      } catch (err) {
        if (who === 'A') aStepError = err;
        throw err;
      }
      await ctx.step('c', () => {
        call(ctx.id, 'c');
        return { by: who };
      });
      await ctx.tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [ctx.id]);
    };
  const a = inbox(s.pool, handler('A')).process(envelope(id));
  await inB.promise;
  s.stall(); // A stops renewing while inside step b (a long GC pause, a network partition)

  // B, redelivered meanwhile, is kept out while A's lease lives...
  const early = await inbox(db.pool, handler('B')).process(envelope(id, { redelivered: true, attempt: 2 }));
  expect(early.status).toBe('busy');
  await sleep(1300);
  // ...and takes over once it ran out: step a is not run again, b and c are.
  const b = await inbox(db.pool, handler('B')).process(envelope(id, { redelivered: true, attempt: 3 }));
  expect(b.status).toBe('processed');
  // A's own clock saw that it could not renew in time, and told the handler.
  expect(aSignal?.aborted).toBe(true);
  expect((aSignal!.reason as OnceError).code).toBe('LEASE_LOST');

  letAFinishB.open(); // A's external call returns late; it tries to record step b
  const outcomeA = await a;
  s.release();
  expect(outcomeA.status).toBe('busy');
  expect(OnceError.is(aStepError) && aStepError.code).toBe('LEASE_LOST');
  // The refusal came from the database's owner check: the record was sent.
  expect(s.records).toEqual(['a', 'b']);
  expect(await stepRow(id, 'b')).toEqual({ by: 'B' });
  expect(await stepRow(id, 'a')).toEqual({ by: 'A' });
  expect(callsOf(id, 'a')).toBe(1); // recorded, so never run again
  expect(callsOf(id, 'b')).toBe(2); // A's unrecorded call, then B's
  expect(callsOf(id, 'c')).toBe(1);
  expect((await db.counts()).get(id)).toBe(1);
  const row = await db.pool.query(
    `SELECT status, attempts, owner FROM ${db.schema}.inbox WHERE message_id = $1`,
    [id],
  );
  expect(row.rows[0]).toEqual({ status: 'done', attempts: 2, owner: null });
});

it('the old owner’s final ctx.tx writes and done are refused after a takeover', async () => {
  const id = 'stalled-before-done';
  const s = stallablePool(db.pool);
  const stepsDone = gate();
  const letAWrite = gate();
  const handler =
    (who: string): Handler =>
    async (_e: Envelope, ctx) => {
      for (const step of ['a', 'b']) {
        await ctx.step(step, () => {
          call(ctx.id, step);
          return who;
        });
      }
      if (who === 'A') {
        stepsDone.open();
        await letAWrite.promise;
      }
      await ctx.tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [`${ctx.id}:${who}`]);
      return who;
    };
  const a = inbox(s.pool, handler('A'), { storeResult: true }).process(envelope(id));
  await stepsDone.promise;
  s.stall();
  await sleep(1300);
  const b = await inbox(db.pool, handler('B'), { storeResult: true }).process(
    envelope(id, { redelivered: true }),
  );
  expect(b).toMatchObject({ status: 'processed', result: 'B' });
  letAWrite.open();
  const outcomeA = await a;
  s.release();
  expect(outcomeA.status).toBe('busy');
  const effects = await db.counts();
  expect(effects.get(`${id}:B`)).toBe(1);
  expect(effects.get(`${id}:A`)).toBeUndefined(); // rolled back with A's refused done
  expect(callsOf(id, 'a')).toBe(1);
  expect(callsOf(id, 'b')).toBe(1);
  const dup = await inbox(db.pool, handler('C'), { storeResult: true }).process(
    envelope(id, { redelivered: true }),
  );
  expect(dup).toMatchObject({ status: 'duplicate', result: 'B' });
});

it('the heartbeat keeps a handler running for several lease lengths, extending the delivery each time', async () => {
  const id = 'long-handler';
  const extended: number[] = [];
  let signal: AbortSignal | undefined;
  const long = inbox(
    db.pool,
    async (_e, ctx) => {
      signal = ctx.signal;
      await ctx.step('slow-call', async () => {
        await sleep(3500); // over two leases
        call(ctx.id, 'slow-call');
        return 'ok';
      });
    },
    { mode: { lease: { leaseMs: 1500, heartbeatMs: 250 } } },
  ).process(envelope(id, { liveness: { extend: (ms) => void extended.push(ms) } }));
  const rival = inbox(db.pool, async () => {
    throw new Error('the rival must never run');
  });
  let finished = false;
  void long.finally(() => {
    finished = true;
  });
  // Only a rival call that began and ended while the long handler ran must be busy: on a loaded
  // machine the last calls can come after its COMMIT, and are then rightly duplicates.
  const rivalOutcomes: string[] = [];
  for (let t = 0; t < 9 && !finished; t++) {
    await sleep(350);
    if (finished) break;
    const o = await rival.process(envelope(id, { redelivered: true }));
    if (finished && o.status === 'duplicate') break;
    rivalOutcomes.push(o.status === 'retry' ? `retry: ${o.error.message}` : o.status);
    if (o.status === 'busy') expect(o.delayMs).toBeGreaterThan(0);
  }
  expect(await long).toMatchObject({ status: 'processed' });
  expect(rivalOutcomes.length).toBeGreaterThanOrEqual(3);
  expect(rivalOutcomes.join(', ')).toBe(rivalOutcomes.map(() => 'busy').join(', '));
  expect(signal?.aborted).toBe(false);
  // Claim, step start, then a renewal every 250 ms for 3.5 s, all with the lease length: one clock.
  expect(extended.length).toBeGreaterThanOrEqual(8);
  expect(new Set(extended)).toEqual(new Set([1500]));
  expect((await rival.process(envelope(id, { redelivered: true }))).status).toBe('duplicate');
  expect(callsOf(id, 'slow-call')).toBe(1);
});
