import { createOutbox, createRelay, type Relay } from '@once/core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb, type TestDb } from '../../../../test/support/index.js';
import { createSqsPublisher, type SqsConsumer } from '../../src/index.js';
import { queues, sendAll, sqsClient, unique, waitFor } from './fixtures/env.js';
import { startOnce } from './fixtures/once-consumer.js';

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-relay');
let db: TestDb;
const consumers: SqsConsumer[] = [];
const relays: Relay[] = [];

beforeAll(async () => {
  db = await freshDb('sqs_relay', 12);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  for (const r of relays) await r.stop();
  await q.drop();
  await db.close();
  client.destroy();
});

it('ctx.publish → relay → SqsPublisher → consumer: one effect per message end to end, with duplicate inputs and two relays', async () => {
  const orders = await q.create(`${run}-orders.fifo`);
  const invoices = await q.create(`${run}-invoices.fifo`);
  const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['invoices'] });
  const N = 60;
  // Stage 1: each order (sent twice, under two dedup ids) publishes one invoice in its transaction.
  await startOnce(client, db, orders, consumers, {
    consumer: 'orders',
    outbox,
    handler: async (envelope, { id, publish }) => {
      const { n } = JSON.parse(envelope.body.toString()) as { n: number };
      await publish('invoices', { order: id, n }, { key: envelope.key, headers: { source: 'orders' } });
    },
  });
  // Two relays compete for the same rows; the publisher sends to the invoices queue.
  const publisher = createSqsPublisher({ client, queueUrl: invoices });
  for (let i = 0; i < 2; i++) {
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { invoices: publisher },
      pollIntervalMs: 200,
    });
    relays.push(relay);
    await relay.start();
  }
  // Stage 2: the invoices consumer records one effect per invoice (id = the outbox row id).
  const seen = new Map<string, string | undefined>();
  await startOnce(client, db, invoices, consumers, {
    consumer: 'invoices',
    handler: async (envelope, { tx, id }) => {
      const body = JSON.parse(envelope.body.toString()) as { order: string; n: number };
      seen.set(id, envelope.headers.source);
      await db.record(tx, body.order, envelope.key, body.n);
    },
  });
  const ids = Array.from({ length: N }, (_, i) => `${run}-o${i}`);
  const items = ids.flatMap((id, i) => {
    const m = { id, body: JSON.stringify({ n: i }), group: `c${i % 4}` };
    return [
      { ...m, dedup: `${id}-a` },
      { ...m, dedup: `${id}-b` },
    ];
  });
  await sendAll(client, orders, items);
  await waitFor(async () => (await db.counts(`${run}-o`)).size === N, 60_000, 'all invoices');
  await waitFor(
    async () => (await q.depth(orders)) + (await q.depth(invoices)) === 0,
    30_000,
    'queues drained',
  );
  expect(await db.check(ids, true)).toMatchObject({ ok: true, total: N });
  expect(seen.size).toBe(N); // N distinct outbox ids reached stage 2
  expect([...seen.values()].every((s) => s === 'orders')).toBe(true);
  const pending = await db.pool.query(
    `SELECT count(*)::int AS n FROM "${db.schema}".outbox WHERE status <> 'sent'`,
  );
  expect(pending.rows[0].n).toBe(0);
});
