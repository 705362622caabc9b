import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { silentLogger } from '../../src/adapter/index.js';
import {
  AdminError,
  AdminErrorCode,
  countForgetRange,
  forgetMessage,
  forgetRange,
} from '../../src/admin/index.js';
import { createInbox, type Envelope, type Inbox, PermanentError } from '../../src/index.js';
import { envelope } from './fixtures/db.js';

// forget: a processed id is deleted so that its next delivery runs again. Against a real schema,
// with consumers processing the same ids at the same moment: the row is deleted in one statement,
// so a claim either waits for the delete and runs afresh, or saw the row and acks a duplicate.

let db: Awaited<ReturnType<typeof freshDb>>;

/** Handler: records an effect per run; bodies with `fail` throw a permanent error; `gate` parks it. */
let gate: Promise<void> | undefined;
function inboxOf(consumer: string): Inbox {
  return createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer,
    maxAttempts: 1,
    lockTimeoutMs: 30_000,
    logger: silentLogger,
    handler: async (m, { tx }) => {
      if (gate) await gate;
      if (JSON.parse(m.body.toString()).fail) throw new PermanentError('bad');
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [m.id]);
    },
  });
}

const failing = (id: string): Envelope =>
  envelope(id, { body: Buffer.from(JSON.stringify({ id, fail: true })) });

async function adminError(p: Promise<unknown>): Promise<AdminError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!AdminError.is(err)) throw new Error(`expected an AdminError, got ${String(err)}`);
  return err;
}

async function statusOf(consumer: string, id: string): Promise<string | undefined> {
  const r = await db.pool.query<{ status: string }>(
    `SELECT status FROM ${db.schema}.inbox WHERE consumer = $1 AND message_id = $2`,
    [consumer, id],
  );
  return r.rows[0]?.status;
}

/** A lease-mode step recorded for an inbox row (the table lease mode writes). */
async function addStep(consumer: string, id: string, step: string): Promise<void> {
  await db.pool.query(
    `INSERT INTO ${db.schema}.steps (consumer, message_id, step, seq, attempt) VALUES ($1, $2, $3, 1, 1)`,
    [consumer, id, step],
  );
}

/** Resolves to 'pending' when `p` has not settled after `ms`. */
async function settledWithin(p: Promise<unknown>, ms: number): Promise<'settled' | 'pending'> {
  return Promise.race([
    p.then(
      () => 'settled' as const,
      () => 'settled' as const,
    ),
    new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms)),
  ]);
}

beforeAll(async () => {
  db = await freshDb('core_forget', 8);
});
afterAll(async () => {
  await db.close();
});
beforeEach(async () => {
  gate = undefined;
  await db.pool.query(`TRUNCATE ${db.schema}.inbox, ${db.schema}.steps, ${db.schema}.starts, ${db.effects}`);
});

describe('forgetMessage', () => {
  it('deletes a done row and its start count: the next delivery runs the handler again', async () => {
    const inbox = inboxOf('orders');
    expect((await inbox.process(envelope('a'))).status).toBe('processed');
    expect((await inbox.process(envelope('a'))).status).toBe('duplicate');
    await inbox.noteStart(envelope('a'));
    expect(await forgetMessage(db.pool, db.schema, { consumer: 'orders', messageId: 'a' })).toEqual({
      removed: 1,
      steps: 0,
    });
    const starts = await db.pool.query(`SELECT 1 FROM ${db.schema}.starts WHERE message_id = 'a'`);
    expect(starts.rowCount).toBe(0);
    expect((await inbox.process(envelope('a'))).status).toBe('processed');
    expect((await db.counts()).get('a')).toBe(2);
  });

  it('refuses, changing nothing: unknown consumer or id, failed, in progress, steps without forgetSteps', async () => {
    const inbox = inboxOf('orders');
    await inbox.process(envelope('done-1'));
    await inbox.process(failing('failed-1'));
    await db.pool.query(
      `INSERT INTO ${db.schema}.inbox (consumer, message_id, fingerprint, status, owner, lease_until, expires_at)
       VALUES ('orders', 'leased-1', '\\x00', 'in_progress', 'w1', now() + interval '1 minute', now() + interval '1 day')`,
    );
    await addStep('orders', 'done-1', 'charge');
    await addStep('orders', 'failed-1', 'charge');
    await addStep('billing', 'done-1', 'charge');

    const forget = (consumer: string, messageId: string) =>
      adminError(forgetMessage(db.pool, db.schema, { consumer, messageId }));
    expect((await forget('nobody', 'x')).detail).toEqual({
      code: AdminErrorCode.UnknownConsumer,
      consumer: 'nobody',
    });
    expect((await forget('orders', 'x')).code).toBe(AdminErrorCode.UnknownMessage);
    expect((await forget('orders', 'failed-1')).detail).toMatchObject({ code: 'NOT_DONE', status: 'failed' });
    expect((await forget('orders', 'leased-1')).detail).toMatchObject({
      code: 'NOT_DONE',
      status: 'in_progress',
    });
    expect((await forget('orders', 'done-1')).detail).toMatchObject({ code: 'HAS_STEPS', steps: ['charge'] });
    for (const id of ['failed-1', 'leased-1', 'done-1']) expect(await statusOf('orders', id)).toBeDefined();

    const forced = await forgetMessage(
      db.pool,
      db.schema,
      { consumer: 'orders', messageId: 'done-1' },
      { forgetSteps: true },
    );
    expect(forced).toEqual({ removed: 1, steps: 1 });
    // Only the forgotten message's steps went with it.
    const left = await db.pool.query(`SELECT consumer, message_id FROM ${db.schema}.steps ORDER BY 1, 2`);
    expect(left.rows).toEqual([
      { consumer: 'billing', message_id: 'done-1' },
      { consumer: 'orders', message_id: 'failed-1' },
    ]);
  });

  it('a first delivery still in its transaction is not forgotten, and forget does not wait for it', async () => {
    const inbox = inboxOf('orders');
    await inbox.process(envelope('other'));
    let open!: () => void;
    gate = new Promise((r) => {
      open = r;
    });
    const running = inbox.process(envelope('b'));
    // The claim is made and uncommitted while the handler waits at the gate.
    await new Promise((r) => setTimeout(r, 200));
    const err = await adminError(forgetMessage(db.pool, db.schema, { consumer: 'orders', messageId: 'b' }));
    expect(err.code).toBe(AdminErrorCode.UnknownMessage);
    open();
    expect((await running).status).toBe('processed');
    expect(await forgetMessage(db.pool, db.schema, { consumer: 'orders', messageId: 'b' })).toMatchObject({
      removed: 1,
    });
  });

  it('waits for a transaction that holds the row, then forgets what it committed', async () => {
    const inbox = inboxOf('orders');
    await inbox.process(envelope('c'));
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${db.schema}.inbox WHERE message_id = 'c' FOR UPDATE`);
      const forgetting = forgetMessage(db.pool, db.schema, { consumer: 'orders', messageId: 'c' });
      expect(await settledWithin(forgetting, 300)).toBe('pending');
      await holder.query('COMMIT');
      expect(await forgetting).toEqual({ removed: 1, steps: 0 });
    } finally {
      holder.release();
    }
  });

  it("a redelivery's claim waits on the uncommitted delete, then processes the message afresh", async () => {
    const inbox = inboxOf('orders');
    await inbox.process(envelope('d'));
    await inbox.noteStart(envelope('d'));
    // Hold forget's statement open after it deleted the inbox row: lock the start count it
    // deletes next.
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${db.schema}.starts WHERE message_id = 'd' FOR UPDATE`);
      const forgetting = forgetMessage(db.pool, db.schema, { consumer: 'orders', messageId: 'd' });
      expect(await settledWithin(forgetting, 300)).toBe('pending');
      // The redelivery's claim meets the row being deleted and waits for its fate.
      const redelivery = inbox.process(envelope('d'));
      expect(await settledWithin(redelivery, 300)).toBe('pending');
      expect((await db.counts()).get('d')).toBe(1);
      await holder.query('COMMIT');
      expect(await forgetting).toEqual({ removed: 1, steps: 0 });
      expect((await redelivery).status).toBe('processed');
      expect((await db.counts()).get('d')).toBe(2);
      expect(await statusOf('orders', 'd')).toBe('done');
    } finally {
      holder.release();
    }
  });

  it('many consumers redelivering while it forgets: every run is either a duplicate or a fresh run, never two at once', async () => {
    const inbox = inboxOf('orders');
    await inbox.process(envelope('e'));
    const outcomes = await Promise.all([
      forgetMessage(db.pool, db.schema, { consumer: 'orders', messageId: 'e' }),
      ...Array.from({ length: 4 }, () => inbox.process(envelope('e'))),
    ]);
    const statuses = outcomes.slice(1).map((o) => (o as { status: string }).status);
    // At most one fresh run after the forget, whichever order the statements met in.
    const fresh = statuses.filter((s) => s === 'processed').length;
    expect(fresh).toBeLessThanOrEqual(1);
    expect(statuses.every((s) => s === 'processed' || s === 'duplicate' || s === 'retry')).toBe(true);
    expect((await db.counts()).get('e')).toBe(1 + fresh);
  });
});

describe('forgetRange', () => {
  /** Rows of `consumer` created at the given minutes ago. */
  async function seedAt(consumer: string, rows: [id: string, minutesAgo: number, status?: string][]) {
    const inbox = inboxOf(consumer);
    for (const [id, , status] of rows) {
      await inbox.process(status === 'failed' ? failing(id) : envelope(id));
    }
    for (const [id, minutesAgo] of rows) {
      await db.pool.query(
        `UPDATE ${db.schema}.inbox SET created_at = now() - $3 * interval '1 minute' WHERE consumer = $1 AND message_id = $2`,
        [consumer, id, minutesAgo],
      );
    }
  }

  it('counts by what it would do, then forgets only done rows in the range, in batches', async () => {
    await seedAt('orders', [
      ['old', 120],
      ['r1', 50],
      ['r2', 40],
      ['r3', 30],
      ['r4', 20],
      ['r5', 10],
      ['stepped', 15],
      ['bad', 25, 'failed'],
    ]);
    await seedAt('billing', [['r1', 30]]);
    await addStep('orders', 'stepped', 'charge');
    await addStep('orders', 'leased', 'charge');
    await db.pool.query(
      `INSERT INTO ${db.schema}.inbox (consumer, message_id, fingerprint, status, owner, lease_until, expires_at)
       VALUES ('orders', 'leased', '\\x00', 'in_progress', 'w1', now() + interval '1 minute', now() + interval '1 day')`,
    );
    const since = new Date(Date.now() - 60 * 60_000);
    const count = await countForgetRange(db.pool, db.schema, { consumer: 'orders', since });
    expect(count).toMatchObject({ done: 5, doneWithSteps: 1, failed: 1, inProgress: 1 });

    const progress: number[] = [];
    const result = await forgetRange(
      db.pool,
      db.schema,
      { consumer: 'orders', since, until: count.asOf },
      { batchSize: 2, onProgress: (n) => progress.push(n) },
    );
    expect(result).toEqual({ removed: 5, steps: 0, stopped: false });
    expect(progress).toEqual([2, 4, 5]);
    const left = await db.pool.query<{ consumer: string; message_id: string }>(
      `SELECT consumer, message_id FROM ${db.schema}.inbox ORDER BY consumer, message_id`,
    );
    expect(left.rows.map((r) => `${r.consumer}/${r.message_id}`)).toEqual([
      'billing/r1',
      'orders/bad',
      'orders/leased',
      'orders/old',
      'orders/stepped',
    ]);

    const withSteps = await forgetRange(
      db.pool,
      db.schema,
      { consumer: 'orders', since },
      { forgetSteps: true },
    );
    expect(withSteps).toEqual({ removed: 1, steps: 1, stopped: false });
    expect(await statusOf('orders', 'stepped')).toBeUndefined();
    const steps = await db.pool.query(`SELECT message_id FROM ${db.schema}.steps`);
    expect(steps.rows).toEqual([{ message_id: 'leased' }]);
  });

  it('until bounds the range; an abort stops between batches; an unknown consumer and a bad range are refused', async () => {
    await seedAt('orders', [
      ['a1', 50],
      ['a2', 40],
      ['a3', 30],
      ['a4', 5],
    ]);
    const since = new Date(Date.now() - 60 * 60_000);
    const until = new Date(Date.now() - 20 * 60_000);
    const stop = new AbortController();
    const first = await forgetRange(
      db.pool,
      db.schema,
      { consumer: 'orders', since, until },
      { batchSize: 1, onProgress: () => stop.abort(), signal: stop.signal },
    );
    expect(first).toEqual({ removed: 1, steps: 0, stopped: true });
    expect(await forgetRange(db.pool, db.schema, { consumer: 'orders', since, until })).toMatchObject({
      removed: 2,
    });
    expect(await statusOf('orders', 'a4')).toBe('done');

    const unknown = await adminError(countForgetRange(db.pool, db.schema, { consumer: 'nobody', since }));
    expect(unknown.code).toBe(AdminErrorCode.UnknownConsumer);
    await expect(
      forgetRange(db.pool, db.schema, { consumer: 'orders', since: until, until: since }),
    ).rejects.toThrow(/until .* must be after since/);
    await expect(
      countForgetRange(db.pool, db.schema, { consumer: 'orders', since: new Date('nope') }),
    ).rejects.toThrow(/since must be a valid Date/);
  });
});
