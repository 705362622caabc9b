import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDatabases,
  quoteIdent,
  serviceEnv,
  sleep,
  type TestDatabases,
  waitFor,
} from '../../../../test/support/index.js';
import {
  createOutbox,
  createRelay,
  migrateDatabases,
  type OutboxMessage,
  type OutboxPublisher,
  type Relay,
} from '../../src/index.js';

// One relay over the outboxes of several real databases on the one server (createRelay({
// databases })): each row published exactly once, in order per key per database; one database
// down holds only its own rows; a backlog in one database does not hold up another's row; past
// maxListeners databases are polled, with one LISTEN connection per database at most.

const DEST = 'events';

/** What the shared publisher saw: each message with its database (from its body) and when. */
interface Seen {
  db: string;
  key: string;
  n: number;
  id: string;
  at: number;
}

/**
 * A publisher shared by every database, as the relay's are. A body is `db|key|n`; `delayOf(db)`
 * is how long a call carrying that database's rows waits for its "broker".
 */
function recordingPublisher(delayOf: (db: string) => number = () => 0) {
  const seen: Seen[] = [];
  const calls: { db: string; startedAt: number }[] = [];
  const publisher: OutboxPublisher = {
    async publish(messages: OutboxMessage[]) {
      const db = messages[0]!.body.toString().split('|')[0]!;
      calls.push({ db, startedAt: Date.now() });
      const ms = delayOf(db);
      if (ms > 0) await sleep(ms);
      for (const m of messages) {
        const [mdb, key, n] = m.body.toString().split('|');
        seen.push({ db: mdb!, key: key!, n: Number(n), id: m.id, at: Date.now() });
      }
    },
  };
  return { publisher, seen, calls };
}

/** Each row seen once; per database and key, the rows in the order they were enqueued. */
function checkOnceInOrder(seen: Seen[], expected: Map<string, number>) {
  const ids = new Map<string, number>();
  for (const s of seen) ids.set(s.id, (ids.get(s.id) ?? 0) + 1);
  expect([...ids.values()].filter((c) => c > 1)).toEqual([]);
  const perDb = new Map<string, number>();
  for (const s of seen) perDb.set(s.db, (perDb.get(s.db) ?? 0) + 1);
  expect(Object.fromEntries(perDb)).toEqual(Object.fromEntries(expected));
  const last = new Map<string, number>();
  const disorder: string[] = [];
  for (const s of seen) {
    if (s.key === '-') continue;
    const k = `${s.db}/${s.key}`;
    if (s.n !== (last.get(k) ?? -1) + 1) disorder.push(`${k}: ${s.n} after ${last.get(k)}`);
    last.set(k, s.n);
  }
  expect(disorder).toEqual([]);
}

/** A pool on database `name` with room for a listener, two claims and the LISTEN check. */
function poolOn(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => {});
  return pool;
}

/** Enqueues `keys` × `perKey` keyed rows (and `free` rows without a key) in one transaction. */
async function fill(
  pool: pg.Pool,
  db: string,
  o: { keys: number; perKey: number; free?: number; from?: number; delayMs?: number },
) {
  const outbox = createOutbox({ pool, destinations: [DEST] });
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const from = o.from ?? 0;
    for (let n = from; n < from + o.perKey; n++)
      for (let k = 0; k < o.keys; k++)
        await outbox.enqueue(client, DEST, `${db}|k${k}|${n}`, { key: `k${k}`, delayMs: o.delayMs ?? 0 });
    for (let i = 0; i < (o.free ?? 0); i++) await outbox.enqueue(client, DEST, `${db}|-|${i}`);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  outbox.wake();
}

/** The LISTEN sessions per database of `names` now (their last statement is the LISTEN). */
async function listeners(admin: pg.Client, names: readonly string[]): Promise<Record<string, number>> {
  const { rows } = await admin.query<{ datname: string; n: number }>(
    `SELECT datname, count(*)::int AS n FROM pg_stat_activity
      WHERE datname = ANY($1) AND query LIKE 'LISTEN %' GROUP BY datname`,
    [names],
  );
  return Object.fromEntries(rows.map((r) => [r.datname, r.n]));
}

/** Every pool's connections are back in it: none held by the relay. */
function allReleased(pools: pg.Pool[]): boolean {
  return pools.every((p) => p.idleCount === p.totalCount && p.waitingCount === 0);
}

let dbs: TestDatabases;
let pools: pg.Pool[];
let admin: pg.Client;
const NAMES = ['t0', 't1', 't2'];

beforeAll(async () => {
  dbs = await createDatabases('relay', 3);
  pools = dbs.urls.map(poolOn);
  await migrateDatabases({ t0: pools[0]!, t1: pools[1]!, t2: pools[2]! });
  admin = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
  await admin.connect();
}, 60_000);

afterAll(async () => {
  await admin?.query(`ALTER DATABASE ${quoteIdent(dbs.names[1]!)} ALLOW_CONNECTIONS true`).catch(() => {});
  await admin?.end();
  await Promise.all((pools ?? []).map((p) => p.end()));
  await dbs?.drop();
}, 60_000);

/** Empties every outbox between tests. */
async function clear() {
  for (const p of pools) await p.query('DELETE FROM once.outbox');
}

function named(): Record<string, pg.Pool> {
  return { t0: pools[0]!, t1: pools[1]!, t2: pools[2]! };
}

describe('one relay over three databases', () => {
  it('publishes every row of each database exactly once, in order per key per database, and releases every connection on stop', {
    timeout: 30_000,
  }, async () => {
    await clear();
    const { publisher, seen } = recordingPublisher();
    for (const [i, name] of NAMES.entries()) await fill(pools[i]!, name, { keys: 6, perKey: 15, free: 40 });
    const published: { database?: string; count: number }[] = [];
    const relay = createRelay({
      databases: named(),
      publishers: { [DEST]: publisher },
      batchSize: 25,
      pollIntervalMs: 200,
    });
    relay.on('outbox:published', (e) => published.push(e));
    try {
      await relay.start();
      expect(await listeners(admin, dbs.names)).toEqual(Object.fromEntries(dbs.names.map((n) => [n, 1])));
      await waitFor('every row published', () => relay.health().published === 3 * 130, 20_000);
      const h = relay.health();
      expect(h.databases?.map((d) => [d.name, d.published, d.listening, d.pastListenerCap])).toEqual(
        NAMES.map((n) => [n, 130, true, false]),
      );
      expect(h.listening).toBe(true);
      expect(h.pollingOnly).toBe(false);
      expect(h.lastError).toBeUndefined();
      // Each database marked its own rows sent.
      for (const p of pools) {
        const { rows } = await p.query(`SELECT status, count(*)::int AS n FROM once.outbox GROUP BY status`);
        expect(rows).toEqual([{ status: 'sent', n: 130 }]);
      }
      // Events name the database their rows are in.
      for (const name of NAMES)
        expect(published.filter((e) => e.database === name).reduce((n, e) => n + e.count, 0)).toBe(130);
    } finally {
      await relay.stop();
    }
    checkOnceInOrder(seen, new Map(NAMES.map((n) => [n, 130])));
    expect(relay.health().running).toBe(false);
    expect(await listeners(admin, dbs.names)).toEqual({});
    expect(allReleased(pools)).toBe(true);
  });

  it('one database down holds only its rows: the others publish meanwhile, and its rows go out when it is back', {
    timeout: 40_000,
  }, async () => {
    await clear();
    const { publisher, seen } = recordingPublisher();
    const relay = createRelay({
      databases: named(),
      publishers: { [DEST]: publisher },
      pollIntervalMs: 100,
    });
    const down = dbs.names[1]!;
    try {
      await relay.start();
      for (const [i, name] of NAMES.entries()) await fill(pools[i]!, name, { keys: 3, perKey: 4 });
      await waitFor('the first wave', () => relay.health().published === 36, 10_000);
      // t1's next rows are due in a second, when t1 will be down.
      await fill(pools[1]!, 't1', { keys: 3, perKey: 5, from: 4, delayMs: 1000 });
      await admin.query(`ALTER DATABASE ${quoteIdent(down)} ALLOW_CONNECTIONS false`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [down]);
      const downAt = Date.now();
      for (const i of [0, 2]) await fill(pools[i]!, NAMES[i]!, { keys: 3, perKey: 5, from: 4 });
      await waitFor(
        't0 and t2 publishing while t1 is down',
        () => {
          const d = relay.health().databases!;
          return d[0]!.published === 27 && d[2]!.published === 27;
        },
        10_000,
      );
      // Down for 2.5 s at least, past t1's rows' due time.
      await sleep(Math.max(0, downAt + 2500 - Date.now()));
      const h = relay.health();
      const t1 = h.databases![1]!;
      expect(t1.published).toBe(12);
      expect(t1.listening).toBe(false);
      expect(t1.lastError).toMatch(/not currently accepting connections|terminat/);
      expect(h.lastError).toMatch(/^t1: /);
      expect(h.databases![0]!.listening).toBe(true);
      expect(h.databases![2]!.listening).toBe(true);
      expect(h.databases![0]!.lastError).toBeUndefined();
      await admin.query(`ALTER DATABASE ${quoteIdent(down)} ALLOW_CONNECTIONS true`);
      await waitFor('t1 back', () => relay.health().databases![1]!.published === 27, 15_000);
      // Its rounds succeed again, and its LISTEN comes back.
      await waitFor('t1 listening again', () => relay.health().databases![1]!.listening, 5000);
      expect(relay.health().databases![1]!.lastError).toBeUndefined();
      expect(seen.filter((s) => s.db === 't1' && s.at < downAt + 2500)).toHaveLength(12);
    } finally {
      await relay.stop();
    }
    checkOnceInOrder(seen, new Map(NAMES.map((n) => [n, 27])));
    expect(allReleased(pools)).toBe(true);
  });

  it('backlogs in two databases take turns, and hold up a third database’s single row by about a round each', {
    timeout: 30_000,
  }, async () => {
    await clear();
    const ROUND_MS = 150;
    const BACKLOG = 500;
    const { publisher, seen, calls } = recordingPublisher((db) => (db === 't2' ? 0 : ROUND_MS));
    await fill(pools[0]!, 't0', { keys: 0, perKey: 0, free: BACKLOG });
    await fill(pools[1]!, 't1', { keys: 0, perKey: 0, free: BACKLOG });
    const relay = createRelay({
      databases: named(),
      publishers: { [DEST]: publisher },
      batchSize: 50,
      // One place: whenever a round ends, the rounds of the other two databases are waiting. t2,
      // last in the order, gets its turn within a round of each busy database, not after them.
      concurrency: 1,
      // t2 hears of its row by NOTIFY; a poll would not come for 10 s.
      pollIntervalMs: 10_000,
    });
    const started = (db: string, from: number, to: number) =>
      calls.filter((c) => c.db === db && c.startedAt > from && c.startedAt < to).length;
    try {
      await relay.start();
      await waitFor('t0 and t1 busy', () => calls.length >= 4, 10_000);
      const enqueuedAt = Date.now();
      await fill(pools[2]!, 't2', { keys: 1, perKey: 1 });
      await waitFor('t2 row published', () => seen.some((s) => s.db === 't2'), 10_000);
      const at = seen.find((s) => s.db === 't2')!.at;
      const [t0, t1] = relay.health().databases!;
      // Both backlogs were still there: t2 waited for neither.
      expect(t0!.published).toBeLessThan(BACKLOG);
      expect(t1!.published).toBeLessThan(BACKLOG);
      // At most the round in flight and one of the other busy database began before it.
      expect(started('t0', enqueuedAt, at) + started('t1', enqueuedAt, at)).toBeLessThanOrEqual(2);
      expect(at - enqueuedAt).toBeLessThan(3 * ROUND_MS);
      // The two backlogs took turns.
      expect(Math.abs(started('t0', 0, at) - started('t1', 0, at))).toBeLessThanOrEqual(1);
      await waitFor('the backlogs drained', () => relay.health().published === 2 * BACKLOG + 1, 20_000);
    } finally {
      await relay.stop();
    }
    checkOnceInOrder(
      seen,
      new Map([
        ['t0', BACKLOG],
        ['t1', BACKLOG],
        ['t2', 1],
      ]),
    );
  });

  it('stop() during a slow publish, with the other databases waiting for a place: returns at once, calls no publisher after, holds no connection', {
    timeout: 30_000,
  }, async () => {
    await clear();
    const { publisher, calls } = recordingPublisher(() => 5000);
    for (const [i, name] of NAMES.entries()) await fill(pools[i]!, name, { keys: 2, perKey: 2 });
    const relay = createRelay({
      databases: named(),
      publishers: { [DEST]: publisher },
      concurrency: 1,
      pollIntervalMs: 100,
    });
    await relay.start();
    await waitFor('a publish under way', () => calls.length === 1, 10_000);
    // The other two databases' rounds wait for the one place.
    await sleep(300);
    const stopAt = Date.now();
    await relay.stop();
    expect(Date.now() - stopAt).toBeLessThan(1000);
    await sleep(300);
    expect(calls).toHaveLength(1);
    expect(allReleased(pools)).toBe(true);
    expect(await listeners(admin, dbs.names)).toEqual({});
    // Nothing was marked: every row is still pending, attempts unchanged.
    for (const p of pools) {
      const { rows } = await p.query(
        `SELECT status, attempts, count(*)::int AS n FROM once.outbox GROUP BY status, attempts`,
      );
      expect(rows).toEqual([{ status: 'pending', attempts: 0, n: 4 }]);
    }
  });
});

describe('past maxListeners', () => {
  it('five databases, maxListeners 2: two LISTEN connections, three polled, every row published', {
    timeout: 60_000,
  }, async () => {
    const five = await createDatabases('relaycap', 5);
    const fivePools = five.urls.map(poolOn);
    const names = ['a', 'b', 'c', 'd', 'e'];
    const databases = Object.fromEntries(names.map((n, i) => [n, fivePools[i]!]));
    let relay: Relay | undefined;
    try {
      await migrateDatabases(databases);
      const { publisher, seen } = recordingPublisher();
      relay = createRelay({
        databases,
        publishers: { [DEST]: publisher },
        maxListeners: 2,
        pollIntervalMs: 200,
      });
      await relay.start();
      expect(await listeners(admin, five.names)).toEqual({ [five.names[0]!]: 1, [five.names[1]!]: 1 });
      const h = relay.health();
      expect(h.databases?.map((d) => [d.name, d.listening, d.pollingOnly, d.pastListenerCap])).toEqual([
        ['a', true, false, false],
        ['b', true, false, false],
        ['c', false, true, true],
        ['d', false, true, true],
        ['e', false, true, true],
      ]);
      for (const [i, name] of names.entries())
        await fill(fivePools[i]!, name, { keys: 2, perKey: 5, free: 5 });
      await waitFor('every row published', () => relay!.health().published === 5 * 15, 15_000);
      // Still one listener per listening database, none for the polled.
      expect(await listeners(admin, five.names)).toEqual({ [five.names[0]!]: 1, [five.names[1]!]: 1 });
      await relay.stop();
      expect(await listeners(admin, five.names)).toEqual({});
      expect(allReleased(fivePools)).toBe(true);
      checkOnceInOrder(seen, new Map(names.map((n) => [n, 15])));
    } finally {
      await relay?.stop();
      await Promise.all(fivePools.map((p) => p.end()));
      await five.drop();
    }
  });
});
