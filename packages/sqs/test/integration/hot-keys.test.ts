import type { Logger } from '@once/core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb, type TestDb } from '../../../../test/support/index.js';
import type { SqsConsumer } from '../../src/index.js';
import { queues, sendAll, sqsClient, unique, waitFor } from './fixtures/env.js';
import { startOnce } from './fixtures/once-consumer.js';

// Batches whose handlers write rows of a hot key (issue #12, defect 11): on a standard queue the
// messages of one account are spread over concurrent receives, and two batches that lock the same
// accounts in different orders deadlock (40P01). With `keyOf` naming the account, one account is
// never in two transactions at once, so batches never deadlock, and each still holds many messages.

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-hot');
let db: TestDb;
const consumers: SqsConsumer[] = [];
const ACCOUNTS = 5;
const MESSAGES = 160;

beforeAll(async () => {
  db = await freshDb('sqs_hot', 16);
  await db.pool.query(`CREATE TABLE "${db.schema}".accounts (id int PRIMARY KEY, balance bigint NOT NULL)`);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await q.drop();
  await db.close();
  client.destroy();
});

/** A deterministic shuffle (mulberry32), so receives lock the accounts in different orders. */
function shuffled<T>(items: T[], seed: number): T[] {
  let a = seed;
  const random = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** Runs the hot-account workload in batches; `keyed` names the account with keyOf. */
async function hotAccounts(name: string, keyed: boolean) {
  const url = await q.create(`${run}-${name}`);
  await db.pool.query(`TRUNCATE "${db.schema}".accounts`);
  await db.pool.query(
    `INSERT INTO "${db.schema}".accounts (id, balance) SELECT generate_series(0, $1 - 1), 0`,
    [ACCOUNTS],
  );
  const ids: string[] = [];
  const items = [];
  for (let i = 0; i < MESSAGES; i += 10) {
    const ten = [];
    for (let j = i; j < i + 10; j++) {
      const id = `${run}-${name}-${j}`;
      ids.push(id);
      ten.push({ body: JSON.stringify({ account: j % ACCOUNTS }), id });
    }
    // Every ten sent together hold each account twice, each ten in another order.
    items.push(...shuffled(ten, i + 1));
  }
  await sendAll(client, url, items);
  const deadlocks: string[] = [];
  const logged: string[] = [];
  const note = (_fields: object, message: string) => {
    if (/deadlock/i.test(message)) logged.push(message);
  };
  const logger: Logger = { debug: note, info: note, warn: note, error: note };
  const perTx = new Map<string, number>();
  const c = await startOnce(client, db, url, consumers, {
    consumer: `hot-${name}`,
    batch: true,
    receivers: 4,
    maxInFlight: 40,
    concurrency: 8,
    retryDelayMs: () => 0,
    logger,
    ...(keyed
      ? { keyOf: (e) => String((JSON.parse(e.body.toString()) as { account: number }).account) }
      : {}),
    handler: async (envelope, { tx, id }) => {
      const { account } = JSON.parse(envelope.body.toString()) as { account: number };
      await tx.query(`UPDATE "${db.schema}".accounts SET balance = balance + 1 WHERE id = $1`, [account]);
      // Hold the row a while, as a handler doing more work would: concurrent batches that share
      // an account then meet each other's locks.
      const res = await tx.query<{ tx: string }>('SELECT txid_current()::text AS tx, pg_sleep(0.005)');
      perTx.set(res.rows[0]!.tx, (perTx.get(res.rows[0]!.tx) ?? 0) + 1);
      await db.record(tx, id, String(account), 1);
    },
  });
  // Every deadlock has a victim statement in some handler, whatever core does next.
  c.inbox.on('handler:settled', (e) => {
    if (e.error?.code === '40P01') deadlocks.push(e.id);
  });
  c.inbox.on('message:retry', (e) => {
    if (e.error.code === '40P01') deadlocks.push(e.id ?? '(no id)');
  });
  await waitFor(async () => (await db.counts(`${run}-${name}-`)).size === MESSAGES, 120_000, 'every effect');
  await waitFor(async () => (await q.depth(url)) === 0, 30_000, 'the queue to empty');
  await c.stop();
  const balances = await db.pool.query<{ total: string }>(
    `SELECT sum(balance)::text AS total FROM "${db.schema}".accounts`,
  );
  return {
    ids,
    deadlocks,
    logged,
    balance: Number(balances.rows[0]!.total),
    largestTx: Math.max(...perTx.values()),
  };
}

it('without keyOf, batches sharing hot accounts deadlock (the control)', async () => {
  const r = await hotAccounts('control', false);
  expect(r.deadlocks.length + r.logged.length).toBeGreaterThan(0);
  // Exactly once all the same.
  expect(await db.check(r.ids)).toMatchObject({ ok: true });
  expect(r.balance).toBe(MESSAGES);
});

it('with keyOf, batches over hot accounts never deadlock, still hold many messages, and every effect lands once', async () => {
  const r = await hotAccounts('keyed', true);
  expect(r.deadlocks).toEqual([]);
  expect(r.logged).toEqual([]);
  expect(await db.check(r.ids)).toMatchObject({ ok: true });
  expect(r.balance).toBe(MESSAGES);
  // Batches, not one message per transaction.
  expect(r.largestTx).toBeGreaterThan(1);
});
