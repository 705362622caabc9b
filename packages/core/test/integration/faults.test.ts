import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox, type Handler, type PgPoolLike } from '../../src/index.js';
import { connectionLost, envelope, faultyPool } from './fixtures/db.js';

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_faults', 8);
});
afterAll(async () => {
  await db.close();
});

const effect: Handler = async (e, { tx }) => {
  await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
};
const inboxOn = (pool: PgPoolLike, consumer: string, handler: Handler = effect, patch = {}) =>
  createInbox({ pool, schema: db.schema, consumer, handler, ...patch });

describe('faults between claim and COMMIT', () => {
  it('connection lost before COMMIT → retry, no claim, no effect; redelivery processes once', async () => {
    const broken = faultyPool(db.pool, ({ text }) => {
      if (text === 'COMMIT') throw connectionLost();
      return undefined;
    });
    const o = await inboxOn(broken, 'pre-commit').process(envelope('f1'));
    // The database's fault, not the message's: the attempt is not spent.
    expect(o).toMatchObject({ status: 'retry', spent: false });
    expect((await db.counts()).get('f1')).toBeUndefined();
    expect(
      await inboxOn(db.pool, 'pre-commit').process(envelope('f1', { redelivered: true, attempt: 2 })),
    ).toMatchObject({
      status: 'processed',
    });
    expect((await db.counts()).get('f1')).toBe(1);
  });

  it('COMMIT reached the server but the reply was lost → retry (not settle-able); redelivery is a duplicate', async () => {
    const broken = faultyPool(db.pool, ({ text }) => (text === 'COMMIT' ? 'after' : undefined));
    const o = await inboxOn(broken, 'lost-reply').process(envelope('f2'));
    expect(o.status).toBe('retry');
    expect(
      await inboxOn(db.pool, 'lost-reply').process(envelope('f2', { redelivered: true, attempt: 2 })),
    ).toMatchObject({
      status: 'duplicate',
    });
    expect((await db.counts()).get('f2')).toBe(1);
  });

  it('a COMMIT that fails (deferred constraint) → not settle-able; nothing committed', async () => {
    await db.pool.query(`CREATE TABLE ${db.schema}.deferred (v int CONSTRAINT v_pos CHECK (v > 0))`);
    await db.pool.query(`
      CREATE FUNCTION ${db.schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
      CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON ${db.schema}.deferred
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${db.schema}.refuse();`);
    const o = await inboxOn(db.pool, 'deferred', async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
      await tx.query(`INSERT INTO ${db.schema}.deferred (v) VALUES (1)`);
    }).process(envelope('f3'));
    expect(['retry', 'failed']).toContain(o.status);
    expect((await db.counts()).get('f3')).toBeUndefined();
    const claim = await db.pool.query(
      `SELECT 1 FROM ${db.schema}.inbox WHERE consumer = 'deferred' AND status = 'done'`,
    );
    expect(claim.rowCount).toBe(0);
  });

  it('control: effects written outside the transaction are repeated by the same fault', async () => {
    const broken = faultyPool(db.pool, ({ text }) => {
      if (text === 'COMMIT') throw connectionLost();
      return undefined;
    });
    const naive: Handler = async (e) => {
      await db.pool.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [`naive-${e.id}`]);
    };
    await inboxOn(broken, 'naive-fault', naive).process(envelope('f4'));
    await inboxOn(db.pool, 'naive-fault', naive).process(envelope('f4', { redelivered: true, attempt: 2 }));
    expect((await db.counts()).get('naive-f4')).toBe(2);
  });

  it('a handler that swallows a failed query cannot commit half its work (COMMIT → ROLLBACK is detected)', async () => {
    const o = await inboxOn(db.pool, 'swallow', async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
      await tx.query('SELECT 1/0').catch(() => {});
    }).process(envelope('f5'));
    expect(o).toMatchObject({ status: 'retry', error: { code: 'COMMIT_ROLLED_BACK' } });
    expect((await db.counts()).get('f5')).toBeUndefined();
  });
});

describe('backend terminated mid-transaction', () => {
  it('pg_terminate_backend → retry, then exactly once on redelivery', async () => {
    const ib = inboxOn(db.pool, 'terminated', async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
      const pid = (await tx.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
      await tx.query('SELECT 1');
    });
    expect(await ib.process(envelope('t1'))).toMatchObject({ status: 'retry' });
    expect((await db.counts()).get('t1')).toBeUndefined();
    const ok = inboxOn(db.pool, 'terminated');
    expect(await ok.process(envelope('t1', { redelivered: true, attempt: 2 }))).toMatchObject({
      status: 'processed',
    });
    expect((await db.counts()).get('t1')).toBe(1);
  });
});

describe('late writes never land', () => {
  it('an un-awaited query issued after the handler returns is refused', async () => {
    let late: Promise<unknown> | undefined;
    const o = await inboxOn(db.pool, 'unawaited', async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
      late = new Promise((r) => setTimeout(r, 50)).then(() =>
        tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [`late-${e.id}`]),
      );
    }).process(envelope('l1'));
    expect(o.status).toBe('processed');
    await expect(late).rejects.toMatchObject({ code: 'TX_REVOKED' });
    const counts = await db.counts();
    expect(counts.get('l1')).toBe(1);
    expect(counts.get('late-l1')).toBeUndefined();
  });

  it('a handler past its deadline: retry, its connection destroyed, its later writes refused', async () => {
    let late: Promise<unknown> | undefined;
    const o = await inboxOn(
      db.pool,
      'deadline',
      async (e, { tx, signal }) => {
        await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
        await new Promise((r) => setTimeout(r, 400));
        expect(signal.aborted).toBe(true);
        late = tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [`late-${e.id}`]);
        await late.catch(() => {});
      },
      { handlerTimeoutMs: 100 },
    ).process(envelope('d1'));
    // The handler's own failure: the attempt is spent, so a handler that always overruns ends at maxAttempts.
    expect(o).toMatchObject({ status: 'retry', spent: true, error: { code: 'HANDLER_TIMEOUT' } });
    await new Promise((r) => setTimeout(r, 500));
    await expect(late).rejects.toMatchObject({ code: 'TX_REVOKED' });
    const counts = await db.counts();
    expect(counts.get('d1')).toBeUndefined();
    expect(counts.get('late-d1')).toBeUndefined();
  });
});
