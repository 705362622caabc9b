import { fileURLToPath } from 'node:url';
import { migrateDatabases } from '@once/core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDatabases,
  killAllChildren,
  serviceEnv,
  startChild,
  type TestDatabases,
} from '../../../../test/support/index.js';
import {
  createSqsConsumer,
  readDeadLetter,
  type SqsConsumer,
  type SqsConsumerOptions,
} from '../../src/index.js';
import { drain, type Outgoing, queues, sendAll, sleep, sqsClient, unique, waitFor } from './fixtures/env.js';

// One SQS consumer over three real databases (a database per tenant, routed by the body's
// `tenant`; on FIFO queues each message group belongs to one tenant): each id takes effect once,
// in its own database only, through duplicate storms and SIGKILLs; one database taken away for
// 60 s holds only its own messages (left in the queue, not deleted) while the other two settle
// theirs; a message the router cannot place is dead-lettered as `unroutable` and recorded nowhere.

const NAMES = ['t0', 't1', 't2'] as const;
type Tenant = (typeof NAMES)[number];
const CHILD = fileURLToPath(new URL('./fixtures/databases-child.mjs', import.meta.url));
const client = sqsClient();
const q = queues(client);
const run = unique('sqs-route');

let dbs: TestDatabases;
/** The consumers' pools (the ones of `dbs` have 2 connections): ended before the databases are dropped. */
let pools: Record<Tenant, pg.Pool>;
const cleanup: (() => Promise<void>)[] = [];

beforeAll(async () => {
  dbs = await createDatabases('sqs_route', 3);
  pools = Object.fromEntries(
    NAMES.map((n, i) => {
      const pool = new pg.Pool({ connectionString: dbs.urls[i], max: 6, connectionTimeoutMillis: 3_000 });
      pool.on('error', () => {});
      return [n, pool];
    }),
  ) as Record<Tenant, pg.Pool>;
  await migrateDatabases(pools);
  for (let i = 0; i < 3; i++) {
    await dbs.pool(i).query('CREATE TABLE effects (id text NOT NULL, tenant text NOT NULL)');
  }
}, 60_000);
afterAll(async () => {
  await killAllChildren();
  for (const c of cleanup.reverse()) await c().catch(() => {});
  await q.drop();
  await Promise.all(Object.values(pools).map((p) => p.end().catch(() => {})));
  await dbs.drop();
  client.destroy();
});

const tenantOf = (i: number): Tenant => NAMES[i % 3]!;
const tenantIn = (body: Buffer): string => (JSON.parse(body.toString()) as { tenant: string }).tenant;

/** A message for tenant `t`, its group that tenant's own (FIFO); `copy` makes a distinct deduplication id. */
function out(id: string, t: string, group: string | undefined, copy = 0): Outgoing {
  return {
    id,
    body: JSON.stringify({ id, tenant: t }),
    ...(group === undefined ? {} : { group, dedup: `${id}~${copy}` }),
  };
}

function consumerOn(queueUrl: string, extra: Partial<SqsConsumerOptions> = {}) {
  const seen = { deadLettered: [] as { id: string | undefined; reason: string }[], paused: 0 };
  const c: SqsConsumer = createSqsConsumer({
    client,
    queueUrl,
    databases: pools,
    route: (e) => tenantIn(e.body),
    waitTimeSeconds: 1,
    visibilityTimeoutS: 5,
    connectTimeoutMs: 2_000,
    retryDelayMs: () => 1_000,
    handler: async (e, { tx, id }) => {
      await tx.query('INSERT INTO effects (id, tenant) VALUES ($1, $2)', [id, tenantIn(e.body)]);
    },
    ...extra,
  });
  c.on('message:dead-lettered', (e) => seen.deadLettered.push({ id: e.id, reason: e.reason }));
  c.on('consumer:paused', () => seen.paused++);
  cleanup.push(() => c.stop());
  return { c, seen };
}

async function effectsIn(i: number, prefix: string): Promise<Map<string, number>> {
  const { rows } = await dbs
    .pool(i)
    .query<{ id: string; n: number }>(
      'SELECT id, count(*)::int AS n FROM effects WHERE id LIKE $1 GROUP BY id',
      [`${prefix}-%`],
    );
  return new Map(rows.map((r) => [r.id, r.n]));
}
async function inboxRows(i: number, prefix: string): Promise<string[]> {
  const { rows } = await dbs
    .pool(i)
    .query<{ m: string }>('SELECT message_id AS m FROM once.inbox WHERE message_id LIKE $1', [`${prefix}-%`]);
  return rows.map((r) => r.m).sort();
}
async function effectCount(prefix: string): Promise<number> {
  let n = 0;
  for (let i = 0; i < 3; i++) n += (await effectsIn(i, prefix)).size;
  return n;
}

/** Every id took effect once in its own database, and is recorded there only. */
async function expectOncePerDatabase(prefix: string, ids: { id: string; t: Tenant }[]): Promise<void> {
  for (let i = 0; i < 3; i++) {
    const mine = ids
      .filter((d) => d.t === NAMES[i])
      .map((d) => d.id)
      .sort();
    const got = await effectsIn(i, prefix);
    expect([...got.keys()].sort()).toEqual(mine);
    expect([...got.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(await inboxRows(i, prefix)).toEqual(mine);
  }
}

/** Takes database `i` away (no new connections, the open ones terminated); returns its restore. */
async function takeDown(i: number): Promise<() => Promise<void>> {
  const name = dbs.names[i]!;
  const admin = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
  await admin.connect();
  await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
  await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
  let restored = false;
  const restore = async () => {
    if (restored) return;
    restored = true;
    await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
    await admin.end();
  };
  cleanup.push(restore);
  return restore;
}

describe('an SQS consumer over three databases', () => {
  it('a duplicate storm on a standard queue: each id takes effect once, in its own database only; nothing dead-lettered', {
    timeout: 90_000,
  }, async () => {
    const prefix = `${run}-storm`;
    const url = await q.create(prefix);
    const dead = await q.create(`${prefix}-dead`);
    const ids = Array.from({ length: 300 }, (_, i) => ({ id: `${prefix}-${i}`, t: tenantOf(i) }));
    // Each id 2 or 3 times, shuffled, received by parallel receivers and run side by side.
    const copies = ids.flatMap((d, i) => Array.from({ length: 2 + (i % 2) }, () => d));
    copies.sort(() => Math.random() - 0.5);
    await sendAll(
      client,
      url,
      copies.map((d) => out(d.id, d.t, undefined)),
    );
    const { c, seen } = consumerOn(url, { receivers: 3, concurrency: 10 });
    await c.start();
    await waitFor(
      async () => (await q.depth(url)) === 0 && c.health().held === 0,
      60_000,
      'the queue drained',
    );
    await expectOncePerDatabase(prefix, ids);
    expect(seen.deadLettered).toEqual([]);
    expect(await q.depth(dead)).toBe(0);
  });

  it('SIGKILLed at random points while consuming a FIFO queue across three databases: effects once per id in its database', {
    timeout: 150_000,
  }, async () => {
    const prefix = `${run}-kill`;
    const url = await q.create(`${prefix}.fifo`, { VisibilityTimeout: '2' });
    const dead = await q.create(`${prefix}-dead.fifo`);
    const N = 900;
    const ids = Array.from({ length: N }, (_, i) => ({ id: `${prefix}-${i}`, t: tenantOf(i) }));
    await sendAll(
      client,
      url,
      ids.map((d, i) => out(d.id, d.t, `${d.t}-g${i % 12}`)),
    );
    const child = startChild({
      script: CHILD,
      env: { SQS_CHILD: JSON.stringify({ queueUrl: url, dbUrls: dbs.urls, batch: true }) },
    });
    for (let k = 0; k < 3; k++) {
      const r = child.runs - 1;
      await child.waitForLine(
        (l) => l.run === r && (l.json as { event?: string })?.event === 'ready',
        60_000,
      );
      const before = await effectCount(prefix);
      await waitFor(async () => (await effectCount(prefix)) > before, 30_000, 'work under way in this run');
      await child.killAfterRandom(0, 300);
      child.start();
    }
    await waitFor(async () => (await effectCount(prefix)) === N, 90_000, 'every id');
    await waitFor(async () => (await q.depth(url)) === 0, 30_000, 'the queue drained');
    await expectOncePerDatabase(prefix, ids);
    expect(child.lines.filter((l) => (l.json as { event?: string })?.event === 'dead-letter')).toEqual([]);
    expect(child.runs).toBe(4);
    expect(await q.depth(dead)).toBe(0);
    await child.kill('SIGTERM');
  });

  it('one database away for 60 s: the other two settle meanwhile, the down tenant stays in the queue (a mixed batch too), unspent; all run once after', {
    timeout: 150_000,
  }, async () => {
    const prefix = `${run}-down`;
    const url = await q.create(`${prefix}.fifo`, { VisibilityTimeout: '5' });
    const dead = await q.create(`${prefix}-dead.fifo`);
    const warm = Array.from({ length: 30 }, (_, i) => ({ id: `${prefix}-w${i}`, t: tenantOf(i) }));
    await sendAll(
      client,
      url,
      warm.map((d, i) => out(d.id, d.t, `${d.t}-g${i % 2}`)),
    );
    // Batch mode: one receive of several groups is one processBatch call, mixing the tenants.
    // maxAttempts 3: t1's messages are received many more times than that while it is away; none
    // of those receives may count as an attempt, or they would be dead-lettered once it is back.
    const { c, seen } = consumerOn(url, { batch: true, maxAttempts: 3 });
    // What each batch call answered, per tenant: the mixed batches are the case a peer got wrong.
    const batches: string[][] = [];
    const processBatch = c.inbox.processBatch.bind(c.inbox);
    c.inbox.processBatch = (async (envelopes, call) => {
      const outcomes = await processBatch(envelopes, call);
      batches.push(outcomes.map((o) => `${tenantIn(o.envelope.body)}:${o.status}`));
      return outcomes;
    }) as typeof c.inbox.processBatch;
    await c.start();
    await waitFor(async () => (await effectCount(prefix)) === warm.length, 30_000, 'the warm-up');
    const restore = await takeDown(1);
    const sent: { id: string; t: Tenant }[] = [];
    try {
      const before = batches.length;
      const downAt = Date.now();
      // Messages for all three keep arriving while t1 is away, every send mixing the tenants.
      for (let round = 0; round < 6; round++) {
        const batch = Array.from({ length: 9 }, (_, i) => ({
          id: `${prefix}-d${round}-${i}`,
          t: tenantOf(i),
        }));
        await sendAll(
          client,
          url,
          batch.map((d, i) => out(d.id, d.t, `${d.t}-g${i % 2}`)),
        );
        sent.push(...batch);
        await sleep(2_000);
      }
      const others = sent.filter((d) => d.t !== 't1');
      const held = sent.filter((d) => d.t === 't1');
      await waitFor(
        async () => {
          const [e0, e2] = [await effectsIn(0, prefix), await effectsIn(2, prefix)];
          return others.every((d) => (d.t === 't0' ? e0 : e2).get(d.id) === 1);
        },
        40_000,
        "t0's and t2's messages to take effect",
      );
      // Hold on until the outage has lasted 60 s: t1's messages stay in the queue, none deleted.
      while (Date.now() - downAt < 60_000) {
        expect(await q.depth(url)).toBe(held.length);
        await sleep(5_000);
      }
      expect(await q.depth(url)).toBe(held.length);
      expect(seen.deadLettered).toEqual([]);
      // The whole consumer never held: the other databases were usable throughout.
      expect(seen.paused).toBe(0);
      expect(c.health().state).toBe('running');
      // At least one batch mixed the tenants: the others ran, t1's came back not run (held).
      const mixed = batches
        .slice(before)
        .filter(
          (b) => b.includes('t1:not-run') && b.some((x) => x === 't0:processed' || x === 't2:processed'),
        );
      expect(mixed.length).toBeGreaterThan(0);
      expect(
        batches
          .slice(before)
          .flat()
          .filter((x) => x.startsWith('t1:') && x !== 't1:not-run'),
      ).toEqual([]);
    } finally {
      await restore();
    }
    await waitFor(
      async () => (await q.depth(url)) === 0 && c.health().held === 0,
      60_000,
      'the held messages to run',
    );
    await expectOncePerDatabase(prefix, [...warm, ...sent]);
    expect(seen.deadLettered).toEqual([]);
    expect(await q.depth(dead)).toBe(0);
  });

  it('a message the router cannot place (it throws, or names an unknown database) is dead-lettered as unroutable, recorded nowhere; the consumer goes on', {
    timeout: 60_000,
  }, async () => {
    const prefix = `${run}-bad`;
    const url = await q.create(`${prefix}.fifo`);
    const dead = await q.create(`${prefix}-dead.fifo`);
    const list = [
      { id: `${prefix}-0`, t: 't0' },
      { id: `${prefix}-boom`, t: 'boom' },
      { id: `${prefix}-1`, t: 't1' },
      { id: `${prefix}-nowhere`, t: 'nowhere' },
      { id: `${prefix}-2`, t: 't2' },
    ];
    await sendAll(
      client,
      url,
      list.map((d) => out(d.id, d.t, `grp-${d.t}`)),
    );
    const { c, seen } = consumerOn(url, {
      route: (e) => {
        const t = tenantIn(e.body);
        if (t === 'boom') throw new Error('no tenant table entry');
        return t;
      },
    });
    await c.start();
    await waitFor(async () => (await q.depth(url)) === 0 && c.health().held === 0, 30_000, 'drained');
    expect(seen.deadLettered.sort((a, b) => String(a.id).localeCompare(String(b.id)))).toEqual([
      { id: `${prefix}-boom`, reason: 'unroutable' },
      { id: `${prefix}-nowhere`, reason: 'unroutable' },
    ]);
    const copies = await drain(client, dead);
    expect(
      copies
        .map((m) => {
          const r = readDeadLetter(m)?.record;
          return [m.MessageAttributes?.['message-id']?.StringValue, r?.reason, r?.error.code];
        })
        .sort(),
    ).toEqual([
      [`${prefix}-boom`, 'unroutable', 'UNROUTABLE'],
      [`${prefix}-nowhere`, 'unroutable', 'UNROUTABLE'],
    ]);
    await expectOncePerDatabase(prefix, [
      { id: `${prefix}-0`, t: 't0' },
      { id: `${prefix}-1`, t: 't1' },
      { id: `${prefix}-2`, t: 't2' },
    ]);
    // The consumer goes on: a later message runs.
    await sendAll(client, url, [out(`${prefix}-3`, 't0', 'grp-t0')]);
    await waitFor(
      async () => (await effectsIn(0, prefix)).get(`${prefix}-3`) === 1,
      30_000,
      'a later message',
    );
  });
});
