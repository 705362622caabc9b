import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb, type TestDb } from '../../../../test/support/index.js';
import { createSqsPublisher, type SqsConsumer } from '../../src/index.js';
import { type Outgoing, queues, SCALE, sendAll, sqsClient, unique, waitFor } from './fixtures/env.js';
import { startNaiveConsumer } from './fixtures/naive-consumer.js';
import { startOnce } from './fixtures/once-consumer.js';

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-once');
let db: TestDb;
const consumers: SqsConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('sqs_once', 12);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await q.drop();
  await db.close();
  client.destroy();
});

const N = Math.round(200 * SCALE);
const allOnce = (counts: Map<string, number>, n: number) =>
  counts.size === n && [...counts.values()].every((c) => c === 1);

describe('duplicates the broker does not catch', () => {
  it.each([false, true])(
    'FIFO, same message-id under two dedup ids, batch=%s: one effect each (naive: two)',
    async (batch) => {
      const prefix = `${run}-fifo-${batch}`;
      const items: Outgoing[] = [];
      for (let i = 0; i < N; i++) {
        const m = { body: JSON.stringify({ n: i }), id: `${prefix}-${i}`, group: `g${i % 5}` };
        items.push({ ...m, dedup: `a${i}` }, { ...m, dedup: `b${i}` });
      }
      const url = await q.create(`${prefix}.fifo`);
      await sendAll(client, url, items);
      // Two competing consumers, so duplicates also race each other across processes' worth of state.
      await startOnce(client, db, url, consumers, { batch, consumer: `fifo-${batch}` });
      await startOnce(client, db, url, consumers, { batch, consumer: `fifo-${batch}` });
      await waitFor(async () => (await db.counts(`${prefix}-`)).size === N, 60_000, 'all ids');
      await waitFor(async () => (await consumers.at(-1)!.health()).held === 0, 10_000, 'settled');
      const ids = Array.from({ length: N }, (_, i) => `${prefix}-${i}`);
      expect(await db.check(ids, true)).toMatchObject({ ok: true, total: N });

      // Control: the same duplicates through the naive consumer.
      const naivePrefix = `${prefix}-naive`;
      const naiveUrl = await q.create(`${naivePrefix}.fifo`);
      await sendAll(
        client,
        naiveUrl,
        items.map((m) => ({ ...m, id: m.id!.replace(prefix, naivePrefix) })),
      );
      const naive = startNaiveConsumer(client, db, naiveUrl);
      await waitFor(
        async () => [...(await db.counts(`${naivePrefix}-`)).values()].reduce((a, b) => a + b, 0) >= 2 * N,
        60_000,
        'naive',
      );
      await naive.stop();
      const naiveCounts = await db.counts(`${naivePrefix}-`);
      expect([...naiveCounts.values()].filter((c) => c > 1).length).toBe(N);
    },
  );

  it('standard queue, the same message-id re-sent: one effect each', async () => {
    const prefix = `${run}-std`;
    const items: Outgoing[] = [];
    for (let i = 0; i < N; i++) items.push({ body: JSON.stringify({ n: i }), id: `${prefix}-${i}` });
    const url = await q.create(prefix);
    await sendAll(client, url, [...items, ...items]);
    await startOnce(client, db, url, consumers, { consumer: 'std', concurrency: 8 });
    await waitFor(async () => (await db.counts(`${prefix}-`)).size === N, 60_000, 'all ids');
    await waitFor(
      async () => (await q.depth(url)) === 0 && consumers.at(-1)!.health().held === 0,
      20_000,
      'queue drained',
    );
    expect(allOnce(await db.counts(`${prefix}-`), N)).toBe(true);
  });
});

it('two separate messages with identical bodies and different message-ids: two effects', async () => {
  const prefix = `${run}-twins`;
  const url = await q.create(`${prefix}.fifo`);
  const body = JSON.stringify({ n: 1, amount: 100 });
  await sendAll(client, url, [
    { body, id: `${prefix}-a`, group: 'g', dedup: 'x1' },
    { body, id: `${prefix}-b`, group: 'g', dedup: 'x2' },
  ]);
  await startOnce(client, db, url, consumers, { consumer: 'twins' });
  await waitFor(async () => (await db.counts(`${prefix}-`)).size === 2, 30_000, 'both');
  expect(await db.counts(`${prefix}-`)).toEqual(
    new Map([
      [`${prefix}-a`, 1],
      [`${prefix}-b`, 1],
    ]),
  );
});

it('outbox publisher: id in the message-id attribute and as dedup id, key as group, re-sends give one effect', async () => {
  const prefix = `${run}-pub`;
  const url = await q.create(`${prefix}.fifo`);
  const publisher = createSqsPublisher({ client });
  const rows = Array.from({ length: 50 }, (_, i) => ({
    id: `${prefix}-${i}`,
    destination: url,
    key: `k${i % 3}`,
    body: JSON.stringify({ n: i }),
  }));
  const first = await publisher.publish(rows);
  expect(first.every((r) => r.ok)).toBe(true);
  // A relay that crashed before marking rows sent publishes them again, past SQS's dedup window as far
  // as the assertion is concerned: once's consumer deduplicates by the message-id attribute.
  const again = await publisher.publish(rows.slice(0, 20).map((r) => ({ ...r })));
  expect(again.every((r) => r.ok)).toBe(true);
  // idFrom 'deduplication-id' shows the dedup id is the outbox id; the handler checks the attribute.
  const seen: string[] = [];
  await startOnce(client, db, url, consumers, {
    consumer: 'pub',
    idFrom: 'deduplication-id',
    handler: async (envelope, { tx, id }) => {
      if (envelope.headers['message-id'] !== id) seen.push(`${id} != ${envelope.headers['message-id']}`);
      const { n } = JSON.parse(envelope.body.toString()) as { n: number };
      await db.record(tx, id, envelope.key, n);
    },
  });
  await waitFor(async () => (await db.counts(`${prefix}-`)).size === 50, 30_000, 'all published');
  expect(
    await db.check(
      rows.map((r) => r.id),
      true,
    ),
  ).toMatchObject({ ok: true, total: 50 });
  expect(seen).toEqual([]);
  const keys = new Set((await db.rows()).filter((e) => e.id.startsWith(prefix)).map((e) => e.key));
  expect([...keys].sort()).toEqual(['k0', 'k1', 'k2']);
});
