import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { MAX_ID_LENGTH } from '../../src/admin/index.js';
import {
  createInbox,
  type FailedOutcome,
  type Handler,
  type InboxOptions,
  PermanentError,
} from '../../src/index.js';
import { fromJsonb } from '../../src/sql/jsonb.js';
import { DATABASE_URL, envelope } from './fixtures/db.js';

// Lease mode's failure paths that must still end: a step key too large for the steps index, step
// results and failure records jsonb cannot hold as they are, and the durability of its own
// autocommit writes when the server runs with synchronous_commit = off.

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_lease_fail', 8);
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
    consumer: `lease-fail-${++consumerSeq}`,
    mode: { lease: { leaseMs: 1000 } },
    retryDelayMs: () => 0,
    handler,
    ...patch,
  });
}

/**
 * `n` code units of three-byte UTF-8 characters (CJK), varied so that PostgreSQL cannot compress
 * the index entry below its limit. Three bytes per code unit is the most UTF-8 a string of a
 * given JavaScript length can take (a four-byte character is two code units).
 */
function wide(n: number, seed: number): string {
  let s = '';
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    s += String.fromCharCode(0x4e00 + ((x >>> 8) % 0x5000)); // high bits: the low ones cycle
  }
  return s;
}

describe('a step key too large for the steps table', () => {
  it('is refused before the step runs: a permanent failure naming the sizes, the effect never called', async () => {
    // Each part is within its own limit; together, 2,848 bytes of UTF-8: more than a btree entry
    // holds. Before the fix the effect ran, then its record failed, on every attempt.
    const consumer = 'c'.repeat(200);
    const id = Array.from(wide(MAX_ID_LENGTH, 2), (c) =>
      String.fromCodePoint(c.charCodeAt(0) + 0x20000 - 0x4e00),
    ).join('');
    const step = wide(200, 3);
    let effects = 0;
    const inbox = lease(
      async (_e, ctx) => {
        await ctx.step(step, () => {
          effects++;
          return 'charged';
        });
      },
      { consumer },
    );
    const first = await inbox.process(envelope(id));
    expect(first).toMatchObject({ status: 'failed', reason: 'permanent' });
    const { error } = first as FailedOutcome;
    expect(error.code).toBe('PERMANENT');
    expect(error.message).toMatch(/2848 bytes .*consumer 200, message id 2048, step name 600.* at most 2600/);
    expect(effects).toBe(0);
    expect(await inbox.process(envelope(id, { redelivered: true, attempt: 2 }))).toMatchObject({
      status: 'failed',
      reason: 'previously-failed',
    });
    expect(effects).toBe(0);
  });

  it('a long ASCII key still runs: the bound is on bytes, well above ordinary names', async () => {
    const inbox = lease(async (_e, ctx) => ctx.step('s'.repeat(200), () => 'ok'), { storeResult: true });
    expect(await inbox.process(envelope('x'.repeat(MAX_ID_LENGTH)))).toMatchObject({
      status: 'processed',
      result: 'ok',
    });
  });
});

describe('values jsonb cannot hold as they are', () => {
  // A NUL and a lone surrogate, in a value and in an object key.
  const odd = 'a\u0000b\ud800c';

  it('a step result with NUL and a lone surrogate is recorded: the retry resumes without running it again', async () => {
    let effects = 0;
    let runs = 0;
    const seen: unknown[] = [];
    const inbox = lease(
      async (_e, ctx) => {
        runs++;
        const got = await ctx.step('read-device', () => {
          effects++;
          return { text: odd, [odd]: [odd] };
        });
        seen.push(got);
        if (runs === 1) throw new Error('mailer unavailable'); // transient, after the step
        return got;
      },
      { storeResult: true },
    );
    expect(await inbox.process(envelope('nul-1'))).toMatchObject({ status: 'retry', spent: true });
    const second = await inbox.process(envelope('nul-1', { redelivered: true, attempt: 2 }));
    expect(second).toMatchObject({ status: 'processed' });
    expect(effects).toBe(1);
    const want = { text: odd, [odd]: [odd] };
    expect(seen).toEqual([want, want]);
    expect((seen[1] as { text: string }).text).toBe(odd);
    // The handler's result went into `done` as well, and comes back identical on a duplicate.
    const dup = await inbox.process(envelope('nul-1', { redelivered: true, attempt: 3 }));
    expect(dup).toMatchObject({ status: 'duplicate' });
    expect(dup.status === 'duplicate' && dup.result).toEqual(want);
  });

  it('a permanent failure whose error and headers hold NUL is recorded failed, losslessly', async () => {
    let runs = 0;
    const inbox = lease(async () => {
      runs++;
      throw new PermanentError(`bad byte in ${odd}`);
    });
    const e = envelope('nul-2', { headers: { 'x-odd': odd } });
    expect(await inbox.process(e)).toMatchObject({ status: 'failed', reason: 'permanent' });
    expect(await inbox.process(envelope('nul-2', { redelivered: true, attempt: 2 }))).toMatchObject({
      status: 'failed',
      reason: 'previously-failed',
    });
    expect(runs).toBe(1);
    const row = (
      await db.pool.query(
        `SELECT error, origin FROM ${db.schema}.inbox WHERE consumer = $1 AND message_id = $2`,
        [inbox.consumer, 'nul-2'],
      )
    ).rows[0];
    expect(fromJsonb<{ message: string }>(row.error).message).toBe(`bad byte in ${odd}`);
    expect(fromJsonb<{ headers: Record<string, string> }>(row.origin).headers['x-odd']).toBe(odd);
  });
});

describe('synchronous_commit = off on the server or session', () => {
  it('every lease-mode write still commits with synchronous_commit on', async () => {
    // Every write once makes to the inbox and steps tables is seen by a trigger, which notes the
    // synchronous_commit in force in the writing transaction (it is read again at its commit).
    const s = db.schema;
    await db.pool.query(`
      CREATE TABLE ${s}.audit (seq bigserial, tbl text, op text, status text, owner_set boolean, sc text);
      CREATE FUNCTION ${s}.audit_fn() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        INSERT INTO ${s}.audit (tbl, op, status, owner_set, sc)
        VALUES (TG_TABLE_NAME, TG_OP, to_jsonb(NEW)->>'status', (to_jsonb(NEW)->>'owner') IS NOT NULL,
                current_setting('synchronous_commit'));
        RETURN NEW;
      END $fn$;
      CREATE TRIGGER audit AFTER INSERT OR UPDATE ON ${s}.inbox FOR EACH ROW EXECUTE FUNCTION ${s}.audit_fn();
      CREATE TRIGGER audit AFTER INSERT OR UPDATE ON ${s}.steps FOR EACH ROW EXECUTE FUNCTION ${s}.audit_fn();`);
    const off = new pg.Pool({ connectionString: DATABASE_URL, max: 4, options: '-c synchronous_commit=off' });
    off.on('error', () => {});
    try {
      expect((await off.query('SHOW synchronous_commit')).rows[0].synchronous_commit).toBe('off');
      let runs = 0;
      const inbox = lease(
        async (e, ctx) => {
          runs++;
          await ctx.step('a', () => 'a');
          await sleep(450); // past a heartbeat (leaseMs / 3): a renewal
          if (e.id === 'sc-fail') throw new PermanentError('no');
          if (runs === 1) throw new Error('transient: give the id back');
          return 'done';
        },
        { pool: off, mode: { lease: { leaseMs: 900 } }, storeResult: true },
      );
      expect((await inbox.process(envelope('sc-ok'))).status).toBe('retry'); // claim, step, renew, release
      expect((await inbox.process(envelope('sc-ok'))).status).toBe('processed'); // claim, renew, done
      expect((await inbox.process(envelope('sc-fail'))).status).toBe('failed'); // claim, step, renew, fail
      const audit = (
        await db.pool.query<{ tbl: string; op: string; status: string; owner_set: boolean; sc: string }>(
          `SELECT tbl, op, status, owner_set, sc FROM ${s}.audit ORDER BY seq`,
        )
      ).rows;
      const kinds = new Set(audit.map((a) => `${a.tbl}:${a.op}:${a.status ?? '-'}:${a.owner_set}`));
      // Claims, step records, renewals, the release, done and fail: each kind of write was seen.
      expect([...kinds].sort()).toEqual([
        'inbox:INSERT:in_progress:true',
        'inbox:UPDATE:done:false',
        'inbox:UPDATE:failed:false',
        'inbox:UPDATE:in_progress:false',
        'inbox:UPDATE:in_progress:true',
        'steps:INSERT:-:false',
      ]);
      expect(audit.filter((a) => a.sc !== 'on')).toEqual([]);
    } finally {
      await off.end();
      await db.pool.query(
        `DROP TABLE ${s}.audit; DROP TRIGGER audit ON ${s}.inbox; DROP TRIGGER audit ON ${s}.steps`,
      );
    }
  });
});
