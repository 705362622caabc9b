import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import { createRabbitConsumer, type QueueType, type RabbitConsumer } from '../../src/index.js';
import { amqpAdmin, SCALE, sleep, unique, waitFor } from './fixtures/env.js';

let db: Awaited<ReturnType<typeof freshDb>>;
let admin: Awaited<ReturnType<typeof amqpAdmin>>;
const consumers: RabbitConsumer[] = [];
const queues: string[] = [];
const run = unique('rmq-once');

beforeAll(async () => {
  db = await freshDb('rmq_once', 12);
  admin = await amqpAdmin(run);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  for (const q of queues) await admin.dropTopology(q);
  await admin.close();
  await db.close();
});

/** n distinct ids, plus `dupRate` of them published again (same id, same body), shuffled in. */
function withDuplicates(prefix: string, n: number, dupRate: number) {
  const items = Array.from({ length: n }, (_, i) => ({
    body: JSON.stringify({ id: `${prefix}-${i}` }),
    options: { messageId: `${prefix}-${i}` },
  }));
  const dups = items.filter((_, i) => i % Math.round(1 / dupRate) === 0).map((x) => ({ ...x }));
  const all = [...items];
  for (const d of dups) all.splice(Math.floor(Math.random() * all.length), 0, d);
  return { all, dups: dups.length };
}

async function consume(
  queue: string,
  patch: Record<string, unknown>,
  handler?: (id: string) => Promise<void>,
) {
  const c = createRabbitConsumer({
    url: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    queue,
    pool: db.pool,
    schema: db.schema,
    consumer: queue,
    socketOptions: { clientProperties: { connection_name: `${run}-${queue}` } },
    handler: async (e, { tx }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [e.id]);
      await handler?.(e.id!);
    },
    ...patch,
  });
  consumers.push(c);
  queues.push(queue);
  const errors: string[] = [];
  c.on('error', (e) => errors.push(`${e.where}: ${e.error.message}`));
  let disconnects = 0;
  c.on('disconnected', () => disconnects++);
  await c.start();
  return { c, errors, disconnects: () => disconnects };
}

async function settledExactly(queue: string, prefix: string, n: number, c: RabbitConsumer) {
  const mine = async () =>
    Number(
      (await db.pool.query(`SELECT count(*) AS n FROM ${db.effects} WHERE id LIKE $1`, [`${prefix}-%`]))
        .rows[0].n,
    );
  await waitFor(async () => (await mine()) >= n && (await admin.count(queue)) === 0, 120_000, `${n} effects`);
  await waitFor(() => c.health().unsettled === 0 && c.health().active === 0, 30_000, 'acks');
  await sleep(300);
  const res = await db.pool.query<{ id: string; n: string }>(
    `SELECT id, count(*) AS n FROM ${db.effects} WHERE id LIKE $1 GROUP BY id`,
    [`${prefix}-%`],
  );
  expect(res.rows.length).toBe(n);
  expect(res.rows.filter((r) => Number(r.n) !== 1)).toEqual([]);
}

describe.each<{ queueType: QueueType; batch: boolean; n: number }>([
  { queueType: 'quorum', batch: true, n: Math.round(10_000 * SCALE) },
  { queueType: 'classic', batch: false, n: Math.round(3_000 * SCALE) },
])('$queueType queue, batch $batch', ({ queueType, batch, n }) => {
  it(`${n} messages with 20 % re-published under the same id give ${n} effects`, async () => {
    const queue = unique(`${run}-dup-${queueType}`);
    const prefix = unique('d');
    const { c, errors } = await consume(queue, {
      queueType,
      batch,
      prefetch: 100,
      concurrency: batch ? 1 : 4,
    });
    const { all, dups } = withDuplicates(prefix, n, 0.2);
    let duplicates = 0;
    c.inbox.on('message:duplicate', () => duplicates++);
    await admin.publishMany(queue, all);
    await settledExactly(queue, prefix, n, c);
    expect(duplicates).toBe(dups);
    expect(errors).toEqual([]);
    expect(c.health()).toMatchObject({ healthy: true, reconnects: 0 });
  });
});

it('out-of-order completion under concurrency: no 406, no reconnect, exactly once', async () => {
  const queue = unique(`${run}-ooo`);
  const prefix = unique('o');
  const n = Math.round(1_500 * SCALE);
  const { c, errors, disconnects } = await consume(
    queue,
    { queueType: 'classic', prefetch: 50, concurrency: 8 },
    () => sleep(Math.random() * 15),
  );
  // Completion order: proof that handlers did finish out of delivery order.
  const order: number[] = [];
  c.inbox.on('message:processed', (e) => order.push(Number(e.id.split('-').pop())));
  await admin.publishMany(
    queue,
    Array.from({ length: n }, (_, i) => ({ body: `${i}`, options: { messageId: `${prefix}-${i}` } })),
  );
  await settledExactly(queue, prefix, n, c);
  expect(order.some((v, i) => i > 0 && v < order[i - 1]!)).toBe(true);
  expect(errors).toEqual([]);
  expect(disconnects()).toBe(0);
  expect(c.health().reconnects).toBe(0);
});

it('graceful stop finishes and acks what was delivered: the next consumer sees no redelivery', async () => {
  const queue = unique(`${run}-stop`);
  const prefix = unique('s');
  const n = 600;
  const first = await consume(queue, { queueType: 'quorum', prefetch: 50, concurrency: 2 }, () => sleep(3));
  await admin.publishMany(
    queue,
    Array.from({ length: n }, (_, i) => ({ body: `${i}`, options: { messageId: `${prefix}-${i}` } })),
  );
  const firstDone: string[] = [];
  const firstSeen: string[] = [];
  first.c.inbox.on('message:processed', (e) => firstDone.push(e.id));
  first.c.on('settled', (e) => firstSeen.push(`${e.id}:${e.plan}`));
  await waitFor(async () => (await db.counts()).size > 100, 30_000, 'some progress');
  await first.c.stop();
  expect(first.c.state).toBe('stopped');
  expect(first.c.health()).toMatchObject({ healthy: false, state: 'stopped' });
  const second = await consume(queue, { queueType: 'quorum', prefetch: 50, concurrency: 2 });
  const secondIds: (string | undefined)[] = [];
  second.c.on('settled', (e) => secondIds.push(e.id));
  let duplicates = 0;
  second.c.inbox.on('message:duplicate', () => duplicates++);
  await settledExactly(queue, prefix, n, second.c);
  // Every message the first consumer processed was acked before it closed: none comes back. (A
  // quorum queue may return messages it had assigned to the cancelled consumer but not yet sent;
  // they come back flagged redelivered and run alone, but the first consumer never saw them.)
  expect(firstDone.filter((id) => secondIds.includes(id))).toEqual([]);
  expect(firstSeen.filter((x) => secondIds.some((id) => x.startsWith(`${id}:`)))).toEqual([]);
  expect(duplicates).toBe(0);
  expect([...first.errors, ...second.errors]).toEqual([]);
});
