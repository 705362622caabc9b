import { fileURLToPath } from 'node:url';
import { migrateDatabases } from '@once/core';
import { DEAD_LETTER_RECORD, decodeDeadLetterRecord } from '@once/core/adapter';
import type { Admin, Kafka, Message } from 'kafkajs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDatabases,
  createTopicsReady,
  fetchOffsetsReady,
  fetchTopicOffsetsReady,
  header,
  kafkaClient,
  killAllChildren,
  readTopic,
  serviceEnv,
  startChild,
  type TestDatabases,
  uniqueName,
  waitFor,
  waitForCommitted,
} from '../../../../test/support/index.js';
import { createKafkaConsumer, type KafkaClient, type KafkaConsumer } from '../../src/index.js';
import { clientUnderTest } from './fixtures/client-under-test.js';

// One Kafka consumer over three real databases (a database per tenant, routed by the `tenant`
// header): each id takes effect once, in its own database only, through duplicate storms and
// SIGKILLs; one database taken away for 60 s holds only its own messages (the committed offset of
// a partition never passes one of them) while the other two settle theirs; a message the router
// cannot place is dead-lettered as `unroutable` and recorded nowhere.

const NAMES = ['t0', 't1', 't2'] as const;
type Tenant = (typeof NAMES)[number];
const childScript = fileURLToPath(new URL('./fixtures/databases-child.mjs', import.meta.url));

let dbs: TestDatabases;
let kafka: Kafka;
let client: KafkaClient;
let admin: Admin;
/** The consumers' pools (the ones of `dbs` have 2 connections): ended before the databases are dropped. */
let pools: Record<Tenant, pg.Pool>;
const cleanup: (() => Promise<void>)[] = [];

beforeAll(async () => {
  dbs = await createDatabases('kafka_route', 3);
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
  kafka = kafkaClient('once-route');
  client = await clientUnderTest('once-route');
  admin = kafka.admin();
  await admin.connect();
}, 60_000);
afterAll(async () => {
  await killAllChildren();
  for (const c of cleanup.reverse()) await c().catch(() => {});
  await admin.disconnect();
  await Promise.all(Object.values(pools).map((p) => p.end().catch(() => {})));
  await dbs.drop();
});

const tenantOf = (i: number): Tenant => NAMES[i % 3]!;

/** A message for tenant `t`: the id in `message-id`, the tenant in a header, a key of that tenant's own. */
function tmessage(id: string, t: string, key = `${t}-k${id.length % 5}`, partition?: number): Message {
  return {
    key,
    value: JSON.stringify({ id }),
    headers: { 'message-id': id, tenant: t },
    ...(partition === undefined ? {} : { partition }),
  };
}

/** A topic with its dead-letter topic, removed after the file. */
async function newTopic(prefix: string, partitions: number): Promise<string> {
  const topic = uniqueName(prefix);
  await createTopicsReady(admin, { [topic]: partitions, [`${topic}.dlq`]: 1 });
  cleanup.push(() => admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }));
  return topic;
}

/**
 * Sends messages with acks from all replicas, in order, and returns where each landed: the
 * partition and offset of messages[k] (those of one partition get consecutive offsets in order).
 */
async function send(topic: string, messages: Message[]): Promise<{ partition: number; offset: bigint }[]> {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    const at: { partition: number; offset: bigint }[] = [];
    for (const m of messages) {
      const [r] = await producer.send({ topic, acks: -1, messages: [m] });
      at.push({ partition: r!.partition, offset: BigInt(r!.baseOffset!) });
    }
    return at;
  } finally {
    await producer.disconnect();
  }
}

/** Sends messages in one request per call (one record batch per partition): fast, no offsets. */
async function sendAll(topic: string, messages: Message[]): Promise<void> {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    for (let i = 0; i < messages.length; i += 500) {
      await producer.send({ topic, acks: -1, messages: messages.slice(i, i + 500) });
    }
  } finally {
    await producer.disconnect();
  }
}

function consumerOn(topic: string, extra: Partial<Parameters<typeof createKafkaConsumer>[0]> = {}) {
  const seen = { deadLettered: [] as { id: string | undefined; reason: string }[], paused: 0 };
  const consumer: KafkaConsumer = createKafkaConsumer({
    kafka: client,
    groupId: uniqueName('g-route'),
    topics: [topic],
    databases: pools,
    route: (e) => e.headers.tenant as string,
    fromBeginning: true,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    connectTimeoutMs: 2_000,
    retryDelayMs: () => 500,
    handler: async (e, { tx, id }) => {
      await tx.query('INSERT INTO effects (id, tenant) VALUES ($1, $2)', [id, e.headers.tenant]);
    },
    ...extra,
  });
  consumer.on('message:dead-lettered', (e) => seen.deadLettered.push({ id: e.id, reason: e.reason }));
  consumer.on('consumer:paused', () => seen.paused++);
  cleanup.push(() => consumer.stop());
  return { consumer, seen };
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

/** Every id of `ids` (tenant by index) took effect once in its own database, and is recorded there only. */
async function expectOncePerDatabase(prefix: string, ids: { id: string; t: Tenant }[]): Promise<void> {
  for (let i = 0; i < 3; i++) {
    const mine = ids
      .filter((d) => d.t === NAMES[i])
      .map((d) => d.id)
      .sort();
    const got = await effectsIn(i, prefix);
    expect([...got.keys()].sort()).toEqual(mine);
    expect([...got.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    expect(await inboxRows(i, prefix)).toEqual([...mine].sort());
  }
}

async function dlqCount(topic: string): Promise<number> {
  const offsets = await fetchTopicOffsetsReady(admin, `${topic}.dlq`);
  return offsets.reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
}

/** Takes database `i` away (no new connections, the open ones terminated); returns its restore. */
async function takeDown(i: number): Promise<() => Promise<void>> {
  const name = dbs.names[i]!;
  const c = new pg.Client({ connectionString: serviceEnv('DATABASE_URL') });
  await c.connect();
  await c.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
  await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
  let restored = false;
  const restore = async () => {
    if (restored) return;
    restored = true;
    await c.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
    await c.end();
  };
  cleanup.push(restore);
  return restore;
}

describe('a Kafka consumer over three databases', () => {
  it('a duplicate storm: each id takes effect once, in its own database only; nothing dead-lettered', {
    timeout: 90_000,
  }, async () => {
    const topic = await newTopic('route-storm', 4);
    const ids = Array.from({ length: 300 }, (_, i) => ({ id: `${topic}-${i}`, t: tenantOf(i) }));
    // Each id 2 or 3 times, shuffled: twins land in the same partition (same key), apart in time.
    const copies = ids.flatMap((d, i) => Array.from({ length: 2 + (i % 2) }, () => d));
    copies.sort(() => Math.random() - 0.5);
    await sendAll(
      topic,
      copies.map((d) => tmessage(d.id, d.t)),
    );
    const { consumer, seen } = consumerOn(topic);
    await consumer.start();
    await waitForCommitted(admin, consumer.options.groupId, topic);
    await expectOncePerDatabase(topic, ids);
    expect(seen.deadLettered).toEqual([]);
    expect(await dlqCount(topic)).toBe(0);
  });

  it('SIGKILLed at random points while consuming across three databases: effects once per id in its database', {
    timeout: 150_000,
  }, async () => {
    const topic = await newTopic('route-kill', 6);
    const N = 3_000;
    const ids = Array.from({ length: N }, (_, i) => ({ id: `${topic}-${i}`, t: tenantOf(i) }));
    await sendAll(
      topic,
      ids.map((d, i) => tmessage(d.id, d.t, `${d.t}-k${i % 20}`)),
    );
    const groupId = uniqueName('g-route-kill');
    const child = startChild({
      script: childScript,
      env: { TOPIC: topic, GROUP: groupId, DB_URLS: dbs.urls.join(',') },
    });
    const total = async () => {
      let n = 0;
      for (let i = 0; i < 3; i++)
        n += Number(
          (await dbs.pool(i).query('SELECT count(*) AS n FROM effects WHERE id LIKE $1', [`${topic}-%`]))
            .rows[0].n,
        );
      return n;
    };
    for (let k = 0; k < 3; k++) {
      const run = child.runs - 1;
      await child.waitForLine(
        (l) => l.run === run && (l.json as { event?: string })?.event === 'started',
        60_000,
      );
      const before = await total();
      await waitFor('work under way in this run', async () => (await total()) > before, 30_000);
      await child.killAfterRandom(0, 300);
      child.start();
    }
    await waitForCommitted(admin, groupId, topic, 120_000);
    await expectOncePerDatabase(topic, ids);
    expect(child.lines.filter((l) => (l.json as { event?: string })?.event === 'dead-lettered')).toEqual([]);
    expect(child.runs).toBe(4);
    await child.kill('SIGTERM');
  });

  it('one database away for 60 s: the other two settle meanwhile, the committed offset never passes a held message, a mixed batch commits only up to the held one; all run once after', {
    timeout: 150_000,
  }, async () => {
    const topic = await newTopic('route-down', 3);
    const warm = Array.from({ length: 30 }, (_, i) => ({ id: `${topic}-w${i}`, t: tenantOf(i) }));
    await sendAll(
      topic,
      warm.map((d) => tmessage(d.id, d.t)),
    );
    const { consumer, seen } = consumerOn(topic);
    await consumer.start();
    await waitForCommitted(admin, consumer.options.groupId, topic);
    const restore = await takeDown(1);
    const sent: { id: string; t: Tenant; partition: number; offset: bigint }[] = [];
    try {
      const downAt = Date.now();

      // One batch that mixes the tenants, in one record batch on partition 0, while t1 is away.
      const mixed = ['t0', 't1', 't2', 't1', 't0', 't2'].map((t, i) => ({
        id: `${topic}-m${i}`,
        t: t as Tenant,
      }));
      const mixedAt = await send(
        topic,
        mixed.map((d) => tmessage(d.id, d.t, `mixed-${d.t}`, 0)),
      );
      // Then messages for all three keep arriving, each partition mixing them, while t1 is away.
      const during: { id: string; t: Tenant; partition: number; offset: bigint }[] = [];
      for (let round = 0; round < 6; round++) {
        const batch = Array.from({ length: 9 }, (_, i) => ({
          id: `${topic}-d${round}-${i}`,
          t: tenantOf(i),
        }));
        const at = await send(
          topic,
          batch.map((d, i) => tmessage(d.id, d.t, `${d.t}-k${i % 3}`, Math.floor(i / 3))),
        );
        during.push(...batch.map((d, i) => ({ ...d, ...at[i]! })));
        await new Promise((r) => setTimeout(r, 2_000));
      }
      sent.push(...mixed.map((d, i) => ({ ...d, ...mixedAt[i]! })), ...during);

      // The other two databases settle everything of theirs while t1 is still away.
      const others = sent.filter((d) => d.t !== 't1');
      await waitFor(
        "t0's and t2's messages to take effect",
        async () => {
          const [e0, e2] = [await effectsIn(0, topic), await effectsIn(2, topic)];
          return others.every((d) => (d.t === 't0' ? e0 : e2).get(d.id) === 1);
        },
        40_000,
      );
      // Per partition, the committed offset stays at or before the first held (t1) message.
      const held = sent.filter((d) => d.t === 't1');
      const firstHeld = new Map<number, bigint>();
      for (const d of held) {
        const f = firstHeld.get(d.partition);
        if (f === undefined || d.offset < f) firstHeld.set(d.partition, d.offset);
      }
      const checkCommitted = async () => {
        const [t] = await fetchOffsetsReady(admin, { groupId: consumer.options.groupId, topics: [topic] });
        for (const p of t!.partitions) {
          const f = firstHeld.get(p.partition);
          if (f !== undefined) expect(BigInt(p.offset)).toBeLessThanOrEqual(f);
        }
        return t!.partitions;
      };
      await checkCommitted();
      // Hold on until the outage has lasted 60 s, checking the offsets now and then.
      while (Date.now() - downAt < 60_000) {
        await new Promise((r) => setTimeout(r, 5_000));
        await checkCommitted();
      }
      expect(consumer.health().state).toBe('running');
      // The whole consumer never held: the other databases were usable throughout.
      expect(seen.paused).toBe(0);
      expect(seen.deadLettered).toEqual([]);
      // The mixed batch: t0's and t2's ran, the committed offset of partition 0 stops at its first t1.
      const p0 = (await checkCommitted()).find((p) => p.partition === 0)!;
      expect(BigInt(p0.offset)).toBeLessThanOrEqual(mixedAt[1]!.offset);
      expect(BigInt(p0.offset)).toBeGreaterThanOrEqual(mixedAt[0]!.offset + 1n);
      const [e0, e2] = [await effectsIn(0, topic), await effectsIn(2, topic)];
      expect([
        e0.get(`${topic}-m0`),
        e0.get(`${topic}-m4`),
        e2.get(`${topic}-m2`),
        e2.get(`${topic}-m5`),
      ]).toEqual([1, 1, 1, 1]);
    } finally {
      await restore();
    }
    await waitForCommitted(admin, consumer.options.groupId, topic, 60_000);
    await expectOncePerDatabase(topic, [...warm, ...sent]);
    expect(seen.deadLettered).toEqual([]);
    expect(await dlqCount(topic)).toBe(0);
    expect(consumer.health()).toMatchObject({ healthy: true, available: true });
  });

  it('a message the router cannot place (it throws, or names an unknown database) is dead-lettered as unroutable, recorded nowhere; the consumer goes on', {
    timeout: 60_000,
  }, async () => {
    const topic = await newTopic('route-bad', 1);
    const list = [
      { id: `${topic}-0`, t: 't0' },
      { id: `${topic}-boom`, t: 'boom' },
      { id: `${topic}-1`, t: 't1' },
      { id: `${topic}-nowhere`, t: 'nowhere' },
      { id: `${topic}-2`, t: 't2' },
    ];
    await sendAll(
      topic,
      list.map((d) => tmessage(d.id, d.t, `k-${d.t}`)),
    );
    const { consumer, seen } = consumerOn(topic, {
      route: (e) => {
        if (e.headers.tenant === 'boom') throw new Error('no tenant table entry');
        return e.headers.tenant as string;
      },
    });
    await consumer.start();
    await waitForCommitted(admin, consumer.options.groupId, topic);
    expect(seen.deadLettered.sort((a, b) => String(a.id).localeCompare(String(b.id)))).toEqual([
      { id: `${topic}-boom`, reason: 'unroutable' },
      { id: `${topic}-nowhere`, reason: 'unroutable' },
    ]);
    const dead = await readTopic(kafka, `${topic}.dlq`, 2);
    expect(
      dead
        .map((m) => {
          const r = decodeDeadLetterRecord(header(m, DEAD_LETTER_RECORD));
          return [header(m, 'message-id'), r?.reason, r?.error.code];
        })
        .sort(),
    ).toEqual([
      [`${topic}-boom`, 'unroutable', 'UNROUTABLE'],
      [`${topic}-nowhere`, 'unroutable', 'UNROUTABLE'],
    ]);
    await expectOncePerDatabase(topic, [
      { id: `${topic}-0`, t: 't0' },
      { id: `${topic}-1`, t: 't1' },
      { id: `${topic}-2`, t: 't2' },
    ]);
    // The consumer goes on: a later message runs.
    await send(topic, [tmessage(`${topic}-3`, 't0', 'k-t0')]);
    await waitForCommitted(admin, consumer.options.groupId, topic);
    expect((await effectsIn(0, topic)).get(`${topic}-3`)).toBe(1);
  });
});
