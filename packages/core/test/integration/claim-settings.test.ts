import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createInbox, type Handler } from '../../src/index.js';
import { DATABASE_URL, envelope } from './fixtures/db.js';

// The message transaction's settings are pinned in the claim's round trip (SET LOCAL after BEGIN,
// before the claim can wait): synchronous_commit on whatever the session's default, and the lock
// timeout.
// The handler reads them inside its own transaction, single and batched, on a pool whose
// sessions default to asynchronous commit and no lock timeout.
let db: Awaited<ReturnType<typeof freshDb>>;
let pool: pg.Pool;
beforeAll(async () => {
  db = await freshDb('core_claimset', 2);
  pool = new pg.Pool({
    connectionString: DATABASE_URL,
    max: 2,
    options: '-c synchronous_commit=off -c lock_timeout=0',
  });
  pool.on('error', () => {});
});
afterAll(async () => {
  await pool.end();
  await db.close();
});

const seen: { id: string; sync: string; lock: string }[] = [];
const handler: Handler = async (e, { tx }) => {
  const r = await tx.query(
    "SELECT current_setting('synchronous_commit') AS sync, current_setting('lock_timeout') AS lock",
  );
  seen.push({ id: e.id!, sync: r.rows[0].sync, lock: r.rows[0].lock });
};

it('sessions of this pool default to asynchronous commit and no lock timeout', async () => {
  const r = await pool.query(
    "SELECT current_setting('synchronous_commit') AS sync, current_setting('lock_timeout') AS lock",
  );
  expect(r.rows[0]).toEqual({ sync: 'off', lock: '0' });
});

for (const isolation of ['read committed', 'repeatable read', 'serializable'] as const) {
  it(`a message's transaction runs with synchronous_commit on and the lock timeout (${isolation}), single and batched`, async () => {
    seen.length = 0;
    const inbox = createInbox({
      pool,
      schema: db.schema,
      consumer: `settings-${isolation}`,
      handler,
      lockTimeoutMs: 1234,
      isolation,
    });
    expect(await inbox.process(envelope('one'))).toMatchObject({ status: 'processed' });
    const outs = await inbox.processBatch(['b1', 'b2', 'b3'].map((id) => envelope(id)));
    expect(outs.map((o) => o.status)).toEqual(['processed', 'processed', 'processed']);
    expect(seen.map((s) => s.id)).toEqual(['one', 'b1', 'b2', 'b3']);
    for (const s of seen) expect(s).toMatchObject({ sync: 'on', lock: '1234ms' });
    // Ended with the transaction: the session's own defaults are back.
    const after = await pool.query("SELECT current_setting('synchronous_commit') AS sync");
    expect(after.rows[0].sync).toBe('off');
  });
}
