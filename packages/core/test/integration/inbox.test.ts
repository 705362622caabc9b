import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { silentLogger } from '../../src/adapter/index.js';
import { LATEST_SCHEMA_VERSION } from '../../src/admin/index.js';
import { createInbox, type Handler, migrate, PermanentError } from '../../src/index.js';
import { envelope, makePool } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_inbox', 8);
});
afterAll(async () => {
  await db.close();
});

const effect: Handler = async (e, { tx }) => {
  await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
  return { charged: e.id };
};

function inbox(consumer: string, patch: Record<string, unknown> = {}) {
  return createInbox({ pool: db.pool, schema: db.schema, consumer, handler: effect, ...patch });
}

describe('one message', () => {
  it('processes once, then reports duplicates with the stored result', async () => {
    const ib = inbox('stored', { storeResult: true });
    const first = await ib.process(envelope('m1'));
    expect(first).toMatchObject({ status: 'processed', id: 'm1', result: { charged: 'm1' } });
    const again = await ib.process(envelope('m1'));
    expect(again).toMatchObject({ status: 'duplicate', id: 'm1', result: { charged: 'm1' } });
    const redelivered = await ib.process(envelope('m1', { redelivered: true, attempt: 2 }));
    expect(redelivered).toMatchObject({ status: 'duplicate', result: { charged: 'm1' } });
    expect((await db.counts()).get('m1')).toBe(1);
  });

  it('keys by consumer: two consumers each apply the same id once', async () => {
    await inbox('a').process(envelope('shared'));
    await inbox('b').process(envelope('shared'));
    await inbox('b').process(envelope('shared'));
    expect((await db.counts()).get('shared')).toBe(2);
  });

  it('conflict policies: reject dead-letters, warn and ignore ack', async () => {
    const warnings: string[] = [];
    const logger = { debug() {}, info() {}, warn: (_f: object, m: string) => warnings.push(m), error() {} };
    for (const [policy, action] of [
      ['reject', 'dead-letter'],
      ['warn', 'ack'],
    ] as const) {
      const ib = inbox(`conflict-${policy}`, { conflictPolicy: policy, logger });
      await ib.process(envelope('c1'));
      const other = envelope('c1', { body: Buffer.from('{"amount":999}') });
      expect(await ib.process(other)).toMatchObject({ status: 'conflict', action });
    }
    expect(warnings.some((w) => /different payload/.test(w))).toBe(true);
    const ignoring = inbox('conflict-ignore', { conflictPolicy: 'ignore' });
    await ignoring.process(envelope('c2'));
    expect(await ignoring.process(envelope('c2', { body: Buffer.from('x') }))).toMatchObject({
      status: 'duplicate',
    });
  });

  it('a transient error is retry with nothing recorded, then processes once', async () => {
    let calls = 0;
    const ib = inbox('transient', {
      handler: async (
        e: { id?: string },
        ctx: { tx: { query: (t: string, v: unknown[]) => Promise<unknown> } },
      ) => {
        calls++;
        await ctx.tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
        if (calls === 1) throw new Error('upstream hiccup');
      },
    });
    const first = await ib.process(envelope('t1'));
    expect(first).toMatchObject({ status: 'retry', spent: true, delayMs: 1000 });
    expect((await db.counts()).get('t1')).toBeUndefined();
    expect(await ib.process(envelope('t1', { attempt: 2, redelivered: true }))).toMatchObject({
      status: 'processed',
    });
    expect((await db.counts()).get('t1')).toBe(1);
  });

  it('a permanent error is recorded failed with body and error; a redelivery is failed again, never duplicate', async () => {
    const ib = inbox('poison', {
      handler: async () => {
        throw new PermanentError('amount must be positive');
      },
    });
    const first = await ib.process(envelope('p1'));
    expect(first).toMatchObject({
      status: 'failed',
      reason: 'permanent',
      error: { message: 'amount must be positive' },
    });
    const again = await ib.process(envelope('p1', { redelivered: true, attempt: 2 }));
    expect(again).toMatchObject({ status: 'failed', reason: 'previously-failed' });
    const fresh = await ib.process(envelope('p1'));
    expect(fresh).toMatchObject({ status: 'failed', reason: 'previously-failed' });
    const row = (
      await db.pool.query(
        `SELECT status, error, body FROM ${db.schema}.inbox WHERE consumer = 'poison' AND message_id = 'p1'`,
      )
    ).rows[0];
    expect(row.status).toBe('failed');
    expect(row.error.message).toBe('amount must be positive');
    expect(JSON.parse(row.body.toString())).toEqual({ id: 'p1', amount: 10 });
  });

  it('classify() and maxAttempts turn transient errors into failed', async () => {
    const ib = inbox('classify', {
      maxAttempts: 3,
      classify: (err: unknown) => ((err as Error).message.includes('400') ? 'permanent' : undefined),
      handler: async (e: { id?: string }) => {
        throw new Error(e.id === 'k400' ? 'HTTP 400' : 'HTTP 503');
      },
    });
    expect(await ib.process(envelope('k400'))).toMatchObject({ status: 'failed', reason: 'permanent' });
    expect(await ib.process(envelope('k503', { attempt: 2 }))).toMatchObject({ status: 'retry' });
    expect(await ib.process(envelope('k503', { attempt: 3 }))).toMatchObject({
      status: 'failed',
      reason: 'max-attempts',
    });
  });

  it('a missing id is failed (invalid-id) and nothing is recorded', async () => {
    const ib = inbox('noid');
    const o = await ib.process(envelope(undefined));
    expect(o).toMatchObject({
      status: 'failed',
      reason: 'invalid-id',
      id: undefined,
      error: { name: 'InvalidIdError' },
    });
  });

  it('a result that is not JSON-serialisable fails the message (its effects roll back)', async () => {
    const ib = inbox('badresult', {
      storeResult: true,
      handler: async (
        e: { id?: string },
        ctx: { tx: { query: (t: string, v: unknown[]) => Promise<unknown> } },
      ) => {
        await ctx.tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
        return { n: 10n };
      },
    });
    const o = await ib.process(envelope('br1'));
    expect(o).toMatchObject({ status: 'failed', reason: 'permanent' });
    expect(o.status === 'failed' && o.error.message).toMatch(/not JSON-serialisable/);
    expect((await db.counts()).get('br1')).toBeUndefined();
  });

  it('a concurrent delivery waits on the claim and becomes a duplicate; past the wait bound it is busy', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let started!: () => void;
    const running = new Promise<void>((r) => {
      started = r;
    });
    const slow = inbox('wait', {
      lockTimeoutMs: 300,
      handler: async (
        e: { id?: string },
        ctx: { tx: { query: (t: string, v: unknown[]) => Promise<unknown> } },
      ) => {
        await ctx.tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
        started();
        await gate;
      },
    });
    const first = slow.process(envelope('w1'));
    await running;
    expect(await slow.process(envelope('w1'))).toMatchObject({ status: 'busy', delayMs: 1000 });
    const patient = inbox('wait', { lockTimeoutMs: 10_000 });
    const second = patient.process(envelope('w1'));
    await new Promise((r) => setTimeout(r, 100));
    release();
    expect(await first).toMatchObject({ status: 'processed' });
    expect(await second).toMatchObject({ status: 'duplicate' });
    expect((await db.counts()).get('w1')).toBe(1);
  });

  it('under REPEATABLE READ a concurrent claim is busy, never processed twice', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const rr = inbox('rr', {
      isolation: 'repeatable read',
      handler: async (
        e: { id?: string },
        ctx: { tx: { query: (t: string, v: unknown[]) => Promise<unknown> } },
      ) => {
        await ctx.tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
        await gate;
      },
    });
    const first = rr.process(envelope('rr1'));
    await new Promise((r) => setTimeout(r, 150));
    const second = rr.process(envelope('rr1'));
    await new Promise((r) => setTimeout(r, 150));
    release();
    const outcomes = [await first, await second].map((o) => o.status).sort();
    expect(outcomes[0]).toBe('busy');
    expect(outcomes[1]).toBe('processed');
    expect((await db.counts()).get('rr1')).toBe(1);
  });

  it('events fire once per outcome and a throwing listener changes nothing', async () => {
    const ib = inbox('events');
    const seen: string[] = [];
    ib.on('message:processed', (e) => seen.push(`processed:${e.id}`));
    ib.on('message:duplicate', (e) => seen.push(`duplicate:${e.id}`));
    ib.on('message:processed', () => {
      throw new Error('listener bug');
    });
    expect(await ib.process(envelope('e1'))).toMatchObject({ status: 'processed' });
    expect(await ib.process(envelope('e1'))).toMatchObject({ status: 'duplicate' });
    expect(seen).toEqual(['processed:e1', 'duplicate:e1']);
  });
});

describe('schema', () => {
  it('migrate() is idempotent and safe when many processes start at once', async () => {
    const pool = makePool(12);
    const schema = `core_mig_${Date.now().toString(36)}`;
    try {
      const results = await Promise.all(Array.from({ length: 10 }, () => migrate(pool, { schema })));
      expect(results.filter((r) => r.from === 0)).toHaveLength(1);
      expect(results.every((r) => r.to === LATEST_SCHEMA_VERSION)).toBe(true);
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });

  it('an unmigrated database is a clear error that says to run migrate; the message is not run', async () => {
    const logged: string[] = [];
    const logger = {
      ...silentLogger,
      error: (f: Record<string, unknown>, m: string) => logged.push(`${m} ${f?.error}`),
    };
    const ib = createInbox({
      pool: db.pool,
      schema: 'nowhere_to_be_found',
      consumer: 'x',
      handler: effect,
      logger,
    });
    await expect(ib.ready()).rejects.toMatchObject({
      code: 'SCHEMA_NOT_INSTALLED',
      message: expect.stringMatching(/run `once migrate`/),
    });
    // Never spent, never dead-lettered: a consumer started before migrate() loses nothing.
    for (const id of ['u1', 'u2']) {
      expect(await ib.process(envelope(id))).toMatchObject({
        status: 'not-run',
        why: 'unavailable',
        error: { code: 'SCHEMA_NOT_INSTALLED' },
      });
    }
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatch(/run `once migrate`/);
  });

  it('a newer schema is refused by migrate() and by the inbox', async () => {
    const pool = makePool(2);
    const schema = `core_new_${Date.now().toString(36)}`;
    try {
      await migrate(pool, { schema });
      await pool.query(`INSERT INTO ${schema}.schema_version (version, name) VALUES (999, 'future')`);
      await expect(migrate(pool, { schema })).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
      const ib = createInbox({ pool, schema, consumer: 'x', handler: effect });
      await expect(ib.ready()).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
      expect(await ib.processBatch([envelope('n1'), envelope('n2')])).toMatchObject([
        { status: 'not-run', why: 'unavailable', error: { code: 'SCHEMA_TOO_NEW' } },
        { status: 'not-run', why: 'unavailable', error: { code: 'SCHEMA_TOO_NEW' } },
      ]);
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });
});
