import { fileURLToPath } from 'node:url';
import { type JetStreamManager, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection, headers as natsHeaders } from '@nats-io/transport-node';
import { type Envelope, migrateDatabases, type Tx } from '@once/core';
import { DEAD_LETTER_RECORD, type DeadLetterRecord, decodeDeadLetterRecord } from '@once/core/adapter';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createDatabases,
  killAllChildren,
  serviceEnv,
  serviceUrls,
  sleep,
  startChild,
  type TestDatabases,
  uniqueName,
  waitFor,
} from '../../../../test/support/index.js';
import { createNatsConsumer, type NatsConsumer } from '../../src/index.js';

// One NATS JetStream consumer over three real databases, a database per tenant: the `tenant`
// header names the database. Each message is claimed, handled and recorded in its own database
// only; one database down holds only its own messages (each naked with core's delay, its attempt
// not spent: the durable's ack floor stays below them), and the other two settle meanwhile.
// Messages are published without Nats-Msg-Id (the id is the `Order-Id` header), so JetStream keeps
// every copy of a duplicate.

const WORKER = fileURLToPath(new URL('./fixtures/routed-consumer.mjs', import.meta.url));
const NAMES = ['t0', 't1', 't2'] as const;
const url = serviceUrls().natsUrl;
let dbs: TestDatabases;
let nc: NatsConnection;
let jsm: JetStreamManager;
const streams: string[] = [];
const consumers: NatsConsumer[] = [];

const pools = () => Object.fromEntries(NAMES.map((n, i) => [n, dbs.pool(i)]));
const byTenant = (e: Envelope): string => {
  const t = e.headers.tenant;
  if (t === 'boom') throw new Error('no tenant table entry');
  return t ?? '';
};

beforeAll(async () => {
  dbs = await createDatabases('nats_route', 3);
  await migrateDatabases(pools());
  for (let i = 0; i < 3; i++) {
    await dbs
      .pool(i)
      .query(
        'CREATE TABLE effects (id text NOT NULL, tenant text NOT NULL, attempt int NOT NULL, xact bigint NOT NULL DEFAULT txid_current())',
      );
  }
  nc = await connect({ servers: url, name: uniqueName('nats-route') });
  jsm = await jetstreamManager(nc);
}, 60_000);
afterAll(async () => {
  await killAllChildren();
  for (const c of consumers) await c.stop().catch(() => {});
  for (const s of streams) await jsm.streams.delete(s).catch(() => {});
  await nc.close();
  await dbs.drop();
});

/** A stream capturing `<name>.in.>` and `<name>.dead`. */
async function stream(prefix: string): Promise<string> {
  const name = uniqueName(prefix).replace(/[^A-Za-z0-9_-]/g, '_');
  await jsm.streams.add({ name, subjects: [`${name}.in.>`, `${name}.dead`] });
  streams.push(name);
  return name;
}

/** Publishes each delivery (id in `Order-Id`, tenant in `tenant`); returns the stream sequences. */
async function publish(name: string, deliveries: { id: string; tenant: string }[]): Promise<number[]> {
  const js = jetstream(nc);
  const acks = await Promise.all(
    deliveries.map((d) => {
      const h = natsHeaders();
      h.set('Order-Id', d.id);
      h.set('tenant', d.tenant);
      return js.publish(`${name}.in.orders`, d.id, { headers: h });
    }),
  );
  return acks.map((a) => a.seq);
}

/** The handler's write: one effects row in the routed database, in the message's transaction. */
const effect = (e: Envelope, tx: Tx) =>
  tx.query('INSERT INTO effects (id, tenant, attempt) VALUES ($1, $2, $3)', [
    e.id,
    e.headers.tenant,
    e.attempt,
  ]);

function consumer(name: string, patch: Record<string, unknown> = {}) {
  const seen = { deadLettered: 0, paused: 0, notRun: 0, settled: [] as (string | undefined)[][] };
  const c = createNatsConsumer({
    servers: url,
    subject: `${name}.in.>`,
    deadLetterSubject: `${name}.dead`,
    databases: pools(),
    route: byTenant,
    idHeader: 'Order-Id',
    concurrency: 4,
    handlerTimeoutMs: 5_000,
    ackWaitMs: 8_000,
    connectTimeoutMs: 2_000,
    logger: false,
    handler: async (e, { tx }) => {
      await effect(e, tx);
    },
    ...patch,
  });
  c.on('message:dead-lettered', () => seen.deadLettered++);
  c.on('consumer:paused', () => seen.paused++);
  c.on('settled', (e) => seen.settled.push([e.id, e.status, e.plan]));
  c.inbox.on('message:not-run', (e) => {
    if (e.why === 'unavailable') seen.notRun++;
  });
  consumers.push(c);
  return { c, seen };
}

/** The dead letters on `<name>.dead`: id (its Order-Id) → record. The stream is small: read it all. */
async function deadLetters(name: string): Promise<Map<string, DeadLetterRecord | undefined>> {
  const out = new Map<string, DeadLetterRecord | undefined>();
  const { state } = await jsm.streams.info(name);
  for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
    const m = await jsm.streams.getMessage(name, { seq });
    if (m?.subject !== `${name}.dead`) continue;
    out.set(m.header.get('Order-Id'), decodeDeadLetterRecord(m.header.get(DEAD_LETTER_RECORD)));
  }
  return out;
}
async function deadCount(name: string): Promise<number> {
  const info = await jsm.streams.info(name, { subjects_filter: `${name}.dead` });
  return info.state.subjects?.[`${name}.dead`] ?? 0;
}

/** id → number of effects, in database `i`, for the ids starting with `prefix`. */
async function effectsIn(i: number, prefix: string): Promise<Map<string, number>> {
  const { rows } = await dbs
    .pool(i)
    .query<{ id: string; n: number }>(
      'SELECT id, count(*)::int AS n FROM effects WHERE id LIKE $1 GROUP BY id',
      [`${prefix}%`],
    );
  return new Map(rows.map((r) => [r.id, r.n]));
}
async function inboxIds(i: number, prefix: string): Promise<string[]> {
  const { rows } = await dbs
    .pool(i)
    .query<{ id: string }>('SELECT message_id AS id FROM once.inbox WHERE message_id LIKE $1 ORDER BY 1', [
      `${prefix}%`,
    ]);
  return rows.map((r) => r.id);
}

/** Every id of `ids` took effect once in its own database, nowhere else, and is recorded there only. */
async function expectOncePerDatabase(prefix: string, ids: { id: string; tenant: string }[]) {
  for (let i = 0; i < 3; i++) {
    const mine = ids
      .filter((d) => d.tenant === NAMES[i])
      .map((d) => d.id)
      .sort();
    const got = await effectsIn(i, prefix);
    expect([...got.keys()].sort()).toEqual(mine);
    expect([...got.values()].filter((n) => n !== 1)).toEqual([]);
    expect(await inboxIds(i, prefix)).toEqual(mine);
  }
}

async function total(prefix: string): Promise<number> {
  let n = 0;
  for (let i = 0; i < 3; i++) n += (await effectsIn(i, prefix)).size;
  return n;
}

const tenantsOf = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i}`, tenant: NAMES[i % 3]! }));

it('a duplicate storm over three tenants: each id takes effect once, in its own database only', async () => {
  const name = await stream('nats-route-storm');
  const prefix = `${name}-`;
  const ids = tenantsOf(name, 300);
  // Each id two or three times, shuffled.
  const deliveries = ids
    .flatMap((d, i) => (i % 2 === 0 ? [d, d, d] : [d, d]))
    .sort(() => Math.random() - 0.5);
  await publish(name, deliveries);
  const { c, seen } = consumer(name, { batch: true, batchSize: 10 });
  await c.start();
  await waitFor('all 300 effects', async () => (await total(prefix)) === ids.length, 60_000);
  await waitFor('every copy settled', () => seen.settled.length === deliveries.length, 30_000);
  await expectOncePerDatabase(prefix, ids);
  expect(seen.settled.filter(([, status]) => status === 'duplicate').length).toBe(
    deliveries.length - ids.length,
  );
  expect(seen.deadLettered).toBe(0);
  expect(await deadCount(name)).toBe(0);
  await c.stop();
});

it('SIGKILLed at random moments across three databases, restarted: each id takes effect once in its database', async () => {
  const name = await stream('nats-route-kill');
  const prefix = `${name}-`;
  const ids = tenantsOf(name, 1200);
  await publish(name, ids);
  const child = startChild({
    script: WORKER,
    env: {
      NATS_URL: url,
      STREAM: name,
      DATABASE_URLS: dbs.urls.join(','),
      CONCURRENCY: '4',
      BATCH: '1',
      DELAY_MS: '30',
    },
  });
  let left = 0;
  for (let k = 0; k < 3; k++) {
    await child.waitForLine(
      (l) => (l.json as { ready?: boolean } | undefined)?.ready === true && l.run === child.runs - 1,
      30_000,
    );
    await child.killAfterRandom(200, 900);
    left = ids.length - (await total(prefix));
    child.start();
  }
  // The last kill still found work to do (a kill after the end would prove nothing).
  expect(left).toBeGreaterThan(0);
  await waitFor('all 1200 effects', async () => (await total(prefix)) === ids.length, 90_000);
  await child.kill();
  expect(child.runs).toBe(4);
  await expectOncePerDatabase(prefix, ids);
  expect(child.lines.filter((l) => (l.json as { deadLettered?: string } | undefined)?.deadLettered)).toEqual(
    [],
  );
  expect(await deadCount(name)).toBe(0);
});

it('a message the router cannot place is dead-lettered as unroutable and recorded nowhere; the consumer goes on', async () => {
  const name = await stream('nats-route-unroutable');
  const prefix = `${name}-`;
  const good = tenantsOf(name, 6);
  const bad = [
    { id: `${name}-boom`, tenant: 'boom' },
    { id: `${name}-nowhere`, tenant: 'nowhere' },
  ];
  await publish(name, [good[0]!, bad[0]!, good[1]!, good[2]!, bad[1]!, ...good.slice(3)]);
  const { c, seen } = consumer(name, { concurrency: 1 });
  await c.start();
  await waitFor(
    'six effects and two dead letters',
    async () => (await total(prefix)) === good.length && (await deadCount(name)) === 2,
    30_000,
  );
  const records = await deadLetters(name);
  expect(records.get(bad[0]!.id)).toMatchObject({
    reason: 'unroutable',
    error: { code: 'UNROUTABLE', message: expect.stringMatching(/route\(\) threw .*no tenant table entry/) },
  });
  expect(records.get(bad[1]!.id)).toMatchObject({
    reason: 'unroutable',
    error: { code: 'UNROUTABLE', message: expect.stringMatching(/route\(\) gave 'nowhere'/) },
  });
  expect(seen.deadLettered).toBe(2);
  await expectOncePerDatabase(prefix, good);
  for (let i = 0; i < 3; i++) {
    const { rows } = await dbs
      .pool(i)
      .query('SELECT 1 FROM once.inbox WHERE message_id = ANY($1)', [bad.map((b) => b.id)]);
    expect(rows).toEqual([]);
  }
  await c.stop();
});

it('one database down for 60 s: the other two settle meanwhile, nothing is dead-lettered, the ack floor stays below its messages, which take effect once after', async () => {
  const name = await stream('nats-route-down');
  const prefix = `${name}-`;
  const down = dbs.names[1]!;
  const sql = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
  await sql.connect();
  // The first message is slow, so the twelve behind it run as ONE batch that mixes the three
  // tenants while t1 is down.
  const gate = { id: `${name}-gate`, tenant: 't0' };
  const mixed = Array.from({ length: 12 }, (_, i) => ({ id: `${name}-m${i}`, tenant: NAMES[i % 3]! }));
  const { c, seen } = consumer(name, {
    batch: true,
    batchSize: 20,
    concurrency: 1,
    handler: async (e: Envelope, { tx }: { tx: Tx }) => {
      if (e.id === gate.id) await sleep(500);
      await effect(e, tx);
    },
  });
  const all = [gate, ...mixed];
  const t1 = (id: string | undefined) => all.some((d) => d.id === id && d.tenant === 't1');
  const t1Seqs: number[] = [];
  const started = Date.now();
  try {
    await sql.query(`ALTER DATABASE "${down}" ALLOW_CONNECTIONS false`);
    await sql.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [down]);
    const seqs = await publish(name, all);
    for (const [i, d] of all.entries()) if (d.tenant === 't1') t1Seqs.push(seqs[i]!);
    await c.start();
    // The mixed batch: t0 and t2 commit, t1's come back not-run (unavailable) and are naked,
    // neither acked nor skipped as duplicates.
    await waitFor(
      'the mixed batch of t0 and t2',
      async () => (await effectsIn(0, prefix)).size + (await effectsIn(2, prefix)).size === 9,
      20_000,
    );
    await waitFor("t1's four held", () => seen.notRun >= 4, 10_000);
    expect(
      seen.settled.filter(([id, status]) => (t1(id) && status !== 'not-run') || status === 'duplicate'),
    ).toEqual([]);
    expect(
      seen.settled.filter(([, status]) => status === 'not-run').every(([, , plan]) => plan === 'retry'),
    ).toBe(true);
    // One batch: one transaction in t0 for its four, one in t2 for its four.
    for (const [i, t] of [
      [0, 't0'],
      [2, 't2'],
    ] as const) {
      const { rows } = await dbs
        .pool(i)
        .query<{ n: number }>('SELECT count(DISTINCT xact)::int AS n FROM effects WHERE id = ANY($1)', [
          mixed.filter((d) => d.tenant === t).map((d) => d.id),
        ]);
      expect(rows[0]!.n).toBe(1);
    }

    // Messages for all three keep arriving while t1 stays down.
    let n = 0;
    while (Date.now() - started < 57_000) {
      const burst = Array.from({ length: 6 }, () => {
        const i = n++;
        return { id: `${name}-s${i}`, tenant: NAMES[i % 3]! };
      });
      const s = await publish(name, burst);
      for (const [i, d] of burst.entries()) if (d.tenant === 't1') t1Seqs.push(s[i]!);
      all.push(...burst);
      await sleep(1_000);
    }
    // The other two databases settle everything while t1 is still down.
    const others = all.filter((d) => d.tenant !== 't1');
    await waitFor(
      't0 and t2 settled while t1 is down',
      async () => (await effectsIn(0, prefix)).size + (await effectsIn(2, prefix)).size === others.length,
      15_000,
    );
    for (const i of [0, 2]) {
      const got = await effectsIn(i, prefix);
      expect([...got.values()].filter((v) => v !== 1)).toEqual([]);
    }
    // The durable's ack floor never passed a held message: it is below the first of t1's.
    const info = await jsm.consumers.info(name, c.options.durable);
    expect(info.ack_floor.stream_seq).toBeLessThan(Math.min(...t1Seqs));
    expect(info.num_ack_pending + info.num_pending).toBeGreaterThanOrEqual(t1Seqs.length);
    expect(c.inbox.unavailableDatabases).toEqual(['t1']);
    expect(
      seen.settled.filter(([id, status]) => (t1(id) && status !== 'not-run') || status === 'duplicate'),
    ).toEqual([]);
    expect(seen.deadLettered).toBe(0);
    expect(seen.paused).toBe(0);
    expect(await deadCount(name)).toBe(0);
    // Down for 60 s in all.
    while (Date.now() - started < 60_000) await sleep(100);
  } finally {
    await sql.query(`ALTER DATABASE "${down}" ALLOW_CONNECTIONS true`);
    await sql.end();
  }
  expect(Date.now() - started).toBeGreaterThanOrEqual(60_000);
  // Back: every t1 message takes effect once, in t1 only, as its first counted start.
  await waitFor('every message after restore', async () => (await total(prefix)) === all.length, 30_000);
  await expectOncePerDatabase(prefix, all);
  const { rows } = await dbs
    .pool(1)
    .query<{ n: number }>('SELECT count(*)::int AS n FROM effects WHERE id LIKE $1 AND attempt <> 1', [
      `${prefix}%`,
    ]);
  expect(rows[0]!.n).toBe(0);
  await waitFor(
    'the ack floor past every message',
    async () =>
      (await jsm.consumers.info(name, c.options.durable)).ack_floor.stream_seq >= Math.max(...t1Seqs),
    20_000,
  );
  expect(seen.deadLettered).toBe(0);
  expect(await deadCount(name)).toBe(0);
  await c.stop();
}, 140_000);
