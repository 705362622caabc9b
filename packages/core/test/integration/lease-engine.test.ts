import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import {
  createInbox,
  type Handler,
  type InboxOptions,
  migrate,
  type Outcome,
  PermanentError,
  type PgPoolLike,
  type QueryResultLike,
} from '../../src/index.js';
import { DATABASE_URL, envelope } from './fixtures/db.js';

// Lease mode on the engine's decisions (issue #28 item 1): each test here is one place where
// lease mode used to decide on its own copy and drifted from transaction mode. Each failed on
// main before lease mode ran through engine/item.ts, engine/plan-runs.ts and
// engine/record-failure.ts.

let db: Awaited<ReturnType<typeof freshDb>>;
beforeAll(async () => {
  db = await freshDb('core_lease_engine');
});
afterAll(async () => {
  await db?.close();
});

let consumerSeq = 0;
function inboxOf(mode: 'lease' | 'transaction', handler: Handler, patch: Partial<InboxOptions> = {}) {
  return createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: `lease-engine-${mode}-${++consumerSeq}`,
    ...(mode === 'lease' ? { mode: { lease: { leaseMs: 2000 } } } : {}),
    retryDelayMs: () => 0,
    handler,
    ...patch,
  });
}

async function rowOf(schema: string, consumer: string, id: string) {
  return (
    await db.pool.query(
      `SELECT status, error, origin, body FROM ${schema}.inbox WHERE consumer = $1 AND message_id = $2`,
      [consumer, id],
    )
  ).rows[0];
}

describe('a throwing fingerprintOf (engine/item.ts decides)', () => {
  it.each(['lease', 'transaction'] as const)(
    '%s mode: the message fails permanent under its id, recorded, and its redelivery is failed again without running',
    async (mode) => {
      let runs = 0;
      const inbox = inboxOf(
        mode,
        async () => {
          runs++;
        },
        {
          fingerprintOf: () => {
            throw new Error('no projection for this body');
          },
        },
      );
      const first = await inbox.process(envelope('fp-1'));
      expect(first).toMatchObject({ status: 'failed', reason: 'permanent', id: 'fp-1' });
      expect(first.status === 'failed' && first.error.message).toMatch(/fingerprintOf threw: no projection/);
      expect(await rowOf(db.schema, inbox.consumer, 'fp-1')).toMatchObject({ status: 'failed' });
      const again = await inbox.process(envelope('fp-1', { redelivered: true, attempt: 2 }));
      expect(again).toMatchObject({ status: 'failed', reason: 'previously-failed' });
      // processBatch decides the same way as process.
      const [batched] = await inbox.processBatch([envelope('fp-2')]);
      expect(batched).toMatchObject({ status: 'failed', reason: 'permanent', id: 'fp-2' });
      expect(runs).toBe(0);
    },
  );
});

/**
 * A pool whose next `connect()` goes to a closed loopback port (connection refused, for real),
 * once armed; every other call goes to the real pool.
 */
function refusingOnce(real: pg.Pool): { pool: PgPoolLike; arm(): void; end(): Promise<void> } {
  // Port 1 on loopback: nothing listens there, so the connection is refused.
  const dead = new pg.Pool({ connectionString: DATABASE_URL.replace(/@[^/]+\//, '@127.0.0.1:1/'), max: 1 });
  dead.on('error', () => {});
  let armed = false;
  return {
    pool: {
      query: <R>(text: string, values?: unknown[]) =>
        real.query(text, values) as unknown as Promise<QueryResultLike<R>>,
      connect: () => {
        if (!armed) return real.connect();
        armed = false;
        return dead.connect();
      },
    },
    arm: () => {
      armed = true;
    },
    end: () => dead.end(),
  };
}

describe('a stop inside a lease batch (engine/plan-runs.ts decides)', () => {
  it('[m1, m2] of one key: m1’s claim is refused (not-run), so m2 does not run and comes back not-run', async () => {
    const ran: string[] = [];
    const faulty = refusingOnce(db.pool);
    try {
      const inbox = inboxOf(
        'lease',
        async (e) => {
          ran.push(e.id!);
        },
        { pool: faulty.pool },
      );
      await inbox.ready();
      faulty.arm();
      const key = { broker: 'test', queue: 'orders', partition: 0 };
      const m1 = envelope('k-1', { source: { ...key, offset: '10' } });
      const m2 = envelope('k-2', { source: { ...key, offset: '11' } });
      const out: Outcome[] = await inbox.processBatch([m1, m2]);
      expect(out.map((o) => o.status)).toEqual(['not-run', 'not-run']);
      expect(out[0]).toMatchObject({ id: 'k-1', why: 'unavailable' });
      expect(out[1]).toMatchObject({ id: 'k-2', why: 'behind' });
      expect(ran).toEqual([]);
      // Nothing was claimed for m2: redelivered in order, both run, m1 first.
      const again = await inbox.processBatch([
        { ...m1, redelivered: true },
        { ...m2, redelivered: true },
      ]);
      expect(again.map((o) => o.status)).toEqual(['processed', 'processed']);
      expect(ran).toEqual(['k-1', 'k-2']);
    } finally {
      await faulty.end();
    }
  });
});

describe('a failure record refused for good (engine/record-failure.ts decides)', () => {
  it('lease mode falls back to the minimal record and dead-letters, instead of retrying forever', async () => {
    // A constraint the operator added makes the full record (with its origin) unstorable: no
    // number of retries would ever write it.
    const schema = `${db.schema}_min`;
    await migrate(db.pool, { schema });
    try {
      await db.pool.query(
        `ALTER TABLE ${schema}.inbox ADD CONSTRAINT small_origin CHECK (origin IS NULL OR octet_length(origin::text) < 200)`,
      );
      let runs = 0;
      const inbox = inboxOf(
        'lease',
        async () => {
          runs++;
          throw new PermanentError('no');
        },
        { schema },
      );
      const o = await inbox.process(envelope('min-1', { headers: { big: 'x'.repeat(500) } }));
      expect(o).toMatchObject({ status: 'failed', reason: 'permanent', id: 'min-1' });
      const row = await rowOf(schema, inbox.consumer, 'min-1');
      expect(row).toMatchObject({ status: 'failed', origin: null, body: null });
      expect(row.error.message).toMatch(/full failure record could not be stored/);
      expect(row.error.reason).toBe('permanent');
      // Recognised at once on redelivery: dead-lettered again, the handler not run again.
      const again = await inbox.process(envelope('min-1', { redelivered: true, attempt: 2 }));
      expect(again).toMatchObject({ status: 'failed', reason: 'previously-failed' });
      expect(runs).toBe(1);
    } finally {
      await db.pool.query(`DROP SCHEMA ${schema} CASCADE`);
    }
  });
});
