import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import {
  createInbox,
  createOutbox,
  type FailedOutcome,
  type Handler,
  type InboxOptions,
  idempotencyKey,
  OnceError,
} from '../../src/index.js';
import { envelope } from './fixtures/db.js';

// Lease mode's outcomes, one delivery at a time, against a real Postgres.

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_lease_process', 8);
});
afterAll(async () => {
  await db?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let consumerSeq = 0;

function lease(handler: Handler, patch: Partial<InboxOptions> = {}) {
  return createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: `lease-${++consumerSeq}`,
    mode: { lease: { leaseMs: 1000 } },
    retryDelayMs: () => 0,
    handler,
    ...patch,
  });
}

async function row(consumer: string, id: string) {
  const res = await db.pool.query(
    `SELECT status, owner, attempts, lease_until, error FROM ${db.schema}.inbox WHERE consumer = $1 AND message_id = $2`,
    [consumer, id],
  );
  return res.rows[0];
}

/** Holds id for `owner` as a live or expired lease, as another worker would. */
async function holdLease(consumer: string, id: string, owner: string, leaseLeftMs: number, attempts = 1) {
  await db.pool.query(
    `INSERT INTO ${db.schema}.inbox (consumer, message_id, fingerprint, status, owner, lease_until, expires_at, attempts)
     VALUES ($1, $2, sha256($3::bytea), 'in_progress', $4, now() + $5 * interval '1 millisecond', now() + interval '1 day', $6)`,
    [consumer, id, envelope(id).body, owner, leaseLeftMs, attempts],
  );
}

describe('lease mode', () => {
  it('processes, commits ctx.tx writes with done, and answers redeliveries as duplicates', async () => {
    const inbox = lease(
      async (e, ctx) => {
        const charge = await ctx.step('charge', () => ({ id: `ch_${e.id}` }));
        await ctx.tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [ctx.id]);
        return charge;
      },
      { storeResult: true },
    );
    expect(await inbox.process(envelope('p1'))).toMatchObject({
      status: 'processed',
      result: { id: 'ch_p1' },
    });
    expect(await inbox.process(envelope('p1', { redelivered: true }))).toMatchObject({
      status: 'duplicate',
      result: { id: 'ch_p1' },
    });
    expect(await row(inbox.consumer, 'p1')).toMatchObject({ status: 'done', owner: null, lease_until: null });
    expect((await db.counts()).get('p1')).toBe(1);
  });

  it('ctx.publish goes out with done: only a committed message leaves an outbox row', async () => {
    const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['receipts'] });
    let fail = true;
    const inbox = lease(
      async (_e, ctx) => {
        await ctx.step('charge', () => 'ch_1');
        await ctx.publish('receipts', { charge: 'ch_1' });
        if (fail) {
          fail = false;
          throw new Error('transient');
        }
      },
      { outbox },
    );
    expect((await inbox.process(envelope('o1'))).status).toBe('retry');
    expect((await inbox.process(envelope('o1', { redelivered: true }))).status).toBe('processed');
    const rows = await db.pool.query(`SELECT destination FROM ${db.schema}.outbox`);
    expect(rows.rows).toEqual([{ destination: 'receipts' }]);
  });

  it('a different payload under the same id is a conflict', async () => {
    const inbox = lease(async () => undefined);
    await inbox.process(envelope('c1'));
    expect(await inbox.process(envelope('c1', { body: Buffer.from('other') }))).toMatchObject({
      status: 'conflict',
      action: 'dead-letter',
    });
  });

  it('a live lease makes a delivery busy until it runs out; an expired one is taken over with the attempt counted', async () => {
    const seen: number[] = [];
    const inbox = lease(async (_e, ctx) => void seen.push(ctx.attempt), { busyDelayMs: 100 });
    await holdLease(inbox.consumer, 'b1', 'someone-else', 5000);
    const busy = await inbox.process(envelope('b1'));
    expect(busy.status).toBe('busy');
    // Redeliver when the holder's lease runs out (by the database's clock), not before.
    expect(busy.status === 'busy' && busy.delayMs).toBeGreaterThan(4000);
    await holdLease(inbox.consumer, 'b2', 'dead-worker', -1);
    expect((await inbox.process(envelope('b2'))).status).toBe('processed');
    expect(seen).toEqual([2]);
  });

  it('a transient failure gives the id back at once; the next attempt resumes after the recorded step', async () => {
    let calls = 0;
    let failNext = true;
    const attempts: number[] = [];
    const inbox = lease(async (_e, ctx) => {
      attempts.push(ctx.attempt);
      await ctx.step('charge', () => ++calls);
      if (failNext) {
        failNext = false;
        throw new Error('mailer unavailable');
      }
    });
    expect(await inbox.process(envelope('t1'))).toMatchObject({ status: 'retry', spent: true });
    expect(await row(inbox.consumer, 't1')).toMatchObject({
      status: 'in_progress',
      owner: null,
      attempts: 1,
    });
    expect((await inbox.process(envelope('t1', { redelivered: true }))).status).toBe('processed');
    expect(calls).toBe(1);
    expect(attempts).toEqual([1, 2]);
  });

  it('a fresh claim deletes steps left under its id by an inbox row that is gone; a takeover replays its own', async () => {
    // Steps whose inbox row is gone (purged by code of schema 8 or earlier on this schema, or a
    // purge that raced a late step record): a new delivery of the id must run its steps afresh.
    const calls: string[] = [];
    const inbox = lease(
      async (e, ctx) =>
        ctx.step('charge', () => {
          calls.push(e.id ?? '');
          return `new-${e.id}`;
        }),
      { storeResult: true },
    );
    const steps = async (id: string) =>
      (
        await db.pool.query(
          `SELECT step, attempt, result FROM ${db.schema}.steps WHERE consumer = $1 AND message_id = $2`,
          [inbox.consumer, id],
        )
      ).rows;
    const stale = (id: string) =>
      db.pool.query(
        `INSERT INTO ${db.schema}.steps (consumer, message_id, step, seq, attempt, result) VALUES ($1, $2, 'charge', 1, 3, '"stale"')`,
        [inbox.consumer, id],
      );
    await stale('s1');
    // Another consumer's steps under the same id are not this claim's to delete.
    await db.pool.query(
      `INSERT INTO ${db.schema}.steps (consumer, message_id, step, seq, attempt, result) VALUES ('elsewhere', 's1', 'charge', 1, 1, '"theirs"')`,
    );
    expect(await inbox.process(envelope('s1'))).toMatchObject({ status: 'processed', result: 'new-s1' });
    expect(calls).toEqual(['s1']);
    expect(await steps('s1')).toEqual([{ step: 'charge', attempt: 1, result: 'new-s1' }]);
    const theirs = await db.pool.query(`SELECT result FROM ${db.schema}.steps WHERE consumer = 'elsewhere'`);
    expect(theirs.rows).toEqual([{ result: 'theirs' }]);

    // A takeover is not fresh: what the earlier attempt of this row recorded is replayed.
    await holdLease(inbox.consumer, 's2', 'dead-worker', -1);
    await stale('s2');
    expect(await inbox.process(envelope('s2'))).toMatchObject({ status: 'processed', result: 'stale' });
    expect(calls).toEqual(['s1']);
    expect(await steps('s2')).toEqual([{ step: 'charge', attempt: 3, result: 'stale' }]);
  });

  it('a permanent failure is recorded; its redelivery is failed again without running', async () => {
    let runs = 0;
    const inbox = lease(async () => {
      runs++;
      throw new OnceError('PERMANENT', 'bad order');
    });
    const first = (await inbox.process(envelope('f1'))) as FailedOutcome;
    expect(first).toMatchObject({ status: 'failed', reason: 'permanent' });
    expect(await inbox.process(envelope('f1', { redelivered: true }))).toMatchObject({
      status: 'failed',
      reason: 'previously-failed',
    });
    expect(runs).toBe(1);
    expect(await row(inbox.consumer, 'f1')).toMatchObject({ status: 'failed', owner: null });
  });

  it('transient failures stop at maxAttempts; so does a message claimed maxAttempts times by workers that died', async () => {
    const inbox = lease(
      async () => {
        throw new Error('always');
      },
      { maxAttempts: 2 },
    );
    expect((await inbox.process(envelope('m1'))).status).toBe('retry');
    expect(await inbox.process(envelope('m1'))).toMatchObject({ status: 'failed', reason: 'max-attempts' });
    // Two workers claimed m2 and died (lease expired); a third claim does not run it again.
    let ran = false;
    const killer = lease(
      async () => {
        ran = true;
      },
      { maxAttempts: 2 },
    );
    await holdLease(killer.consumer, 'm2', 'dead-worker', -1, 2);
    expect(await killer.process(envelope('m2'))).toMatchObject({ status: 'failed', reason: 'max-attempts' });
    expect(ran).toBe(false);
  });

  it('past the deadline: retry, the lease kept so the abandoned step may still record; then resumed', async () => {
    let calls = 0;
    const inbox = lease(
      async (_e, ctx) => {
        await ctx.step('slow', async () => {
          await sleep(400);
          return ++calls;
        });
        await ctx.step('next', () => 'n');
      },
      { handlerTimeoutMs: 100, mode: { lease: { leaseMs: 600 } } },
    );
    const first = await inbox.process(envelope('d1'));
    expect(first).toMatchObject({ status: 'retry' });
    // Not redelivered before the kept lease can have run out.
    expect(first.status === 'retry' && first.delayMs).toBeGreaterThanOrEqual(600);
    expect((await inbox.process(envelope('d1', { redelivered: true }))).status).toBe('busy');
    // The step records at ~400 ms (still the owner, and renewing the lease); it runs out ~600 ms later.
    await sleep(1300);
    const fast = lease(async (_e, ctx) => {
      expect(await ctx.step('slow', () => ++calls)).toBe(1);
      await ctx.step('next', () => 'n');
    });
    const again = await createInbox({ ...fast.options, consumer: inbox.consumer }).process(
      envelope('d1', { redelivered: true }),
    );
    expect(again.status).toBe('processed');
    expect(calls).toBe(1);
  });

  it('processBatch: one at a time, in order, stopping at the first busy', async () => {
    const order: string[] = [];
    const inbox = lease(async (e) => void order.push(e.id!));
    await holdLease(inbox.consumer, 'q2', 'someone-else', 5000);
    const out = await inbox.processBatch([
      envelope('q1'),
      envelope('q2'),
      envelope('q3'),
      envelope(undefined),
    ]);
    expect(out.map((o) => o.status)).toEqual(['processed', 'busy', 'not-run', 'not-run']);
    expect(out[2]).toMatchObject({ why: 'behind' });
    expect(order).toEqual(['q1']);
  });
});

describe('lease mode: bad input gets a typed error and a routed outcome', () => {
  it.each([
    [
      'a step name reused in one run',
      (async (_e, ctx) => {
        await ctx.step('charge', () => 1);
        await ctx.step('charge', () => 2);
      }) as Handler,
      'STEP_NAME_REUSED',
    ],
    [
      'a result JSON cannot hold',
      (async (_e, ctx) => {
        await ctx.step('charge', () => ({ amount: 10n }));
      }) as Handler,
      'STEP_RESULT_NOT_SERIALIZABLE',
    ],
    [
      'steps started together',
      (async (_e, ctx) => {
        await Promise.all([ctx.step('a', () => sleep(10)), ctx.step('b', () => sleep(10))]);
      }) as Handler,
      'STEPS_CONCURRENT',
    ],
    [
      'an empty step name',
      (async (_e, ctx) => void (await ctx.step('', () => 1))) as Handler,
      'INVALID_STEP_NAME',
    ],
  ])('%s: failed at once (retrying cannot help), recorded', async (_, handler, code) => {
    const inbox = lease(handler);
    const out = await inbox.process(envelope('bad'));
    expect(out).toMatchObject({ status: 'failed', reason: 'permanent', error: { code } });
    expect(await row(inbox.consumer, 'bad')).toMatchObject({
      status: 'failed',
      error: { code, reason: 'permanent' },
    });
  });

  it('transactional mode: ctx.step refuses with STEP_NEEDS_LEASE; idempotencyKey is the same in both modes', async () => {
    let key = '';
    let code = '';
    const tx = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'tx-mode',
      maxAttempts: 1,
      handler: async (_e, ctx) => {
        key = ctx.idempotencyKey('charge');
        try {
          await ctx.step('charge', () => 1);
        } catch (err) {
          code = OnceError.is(err) ? err.code : 'other';
          throw err;
        }
      },
    });
    expect((await tx.process(envelope('x1'))).status).toBe('failed');
    expect(code).toBe('STEP_NEEDS_LEASE');
    expect(key).toBe(idempotencyKey('tx-mode', 'x1', 'charge'));
  });

  it('a transactional consumer meeting an in-progress lease row answers busy, never duplicate', async () => {
    const tx = createInbox({
      pool: db.pool,
      schema: db.schema,
      consumer: 'mixed',
      handler: async () => undefined,
      lockTimeoutMs: 100,
    });
    await holdLease('mixed', 'mx1', 'lease-worker', 5000);
    expect((await tx.process(envelope('mx1', { redelivered: true }))).status).toBe('busy');
    expect((await tx.process(envelope('mx1'))).status).toBe('busy');
  });
});
