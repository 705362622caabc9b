import { createInbox } from '@once/core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb, type TestDb } from '../../../../test/support/index.js';
import type { SqsConsumer } from '../../src/index.js';
import { queues, sendAll, sqsClient, unique, waitFor } from './fixtures/env.js';
import { startOnce } from './fixtures/once-consumer.js';

// Starts counted toward maxAttempts (the killer budget) are starts of the handler. A redelivery
// that ends `busy` (another worker holds the id) never ran it, and must not spend that budget.

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-starts');
let db: TestDb;
const consumers: SqsConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('sqs_starts', 12);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await q.drop();
  await db.close();
  client.destroy();
});

it('redeliveries that end busy behind another worker spend no starts: the message runs once the holder lets go', async () => {
  const url = await q.create(run);
  const id = `${run}-held`;
  const consumer = 'starts';
  // Another worker holds the id: its claim is uncommitted while its handler runs, then it fails
  // transiently and rolls back, leaving the id free.
  let letGo!: () => void;
  const released = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  let holding = false;
  const holder = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer,
    handler: async () => {
      holding = true;
      await released;
      throw new Error('the other worker failed transiently');
    },
  });
  const held = holder.process({
    id,
    body: Buffer.from('{"n":1}'),
    headers: {},
    source: { broker: 'sqs', queue: url },
    attempt: 1,
    redelivered: false,
  });
  await waitFor(() => holding, 10_000, 'the holder to claim the id');

  await sendAll(client, url, [{ body: '{"n":1}', id }]);
  let runs = 0;
  let busy = 0;
  const failed: string[] = [];
  const c = await startOnce(client, db, url, consumers, {
    consumer,
    maxAttempts: 2,
    lockTimeoutMs: 200,
    busyDelayMs: 0,
    retryDelayMs: () => 0,
    handler: async (envelope, { tx, id: got }) => {
      runs++;
      await db.record(tx, got, envelope.key, 1);
    },
  });
  c.inbox.on('message:busy', () => {
    busy++;
  });
  c.inbox.on('message:failed', (e) => failed.push(`${e.reason}: ${e.error.message}`));
  // One fresh delivery and three redeliveries, all busy: more than maxAttempts (2) of them.
  await waitFor(() => busy >= 4, 30_000, 'four busy deliveries');
  letGo();
  expect((await held).status).toBe('retry');
  await waitFor(async () => runs > 0 || failed.length > 0, 30_000, 'the message to run or fail');
  await waitFor(async () => (await q.depth(url)) === 0, 30_000, 'the message to be deleted');
  expect(failed).toEqual([]);
  expect(runs).toBe(1);
  expect(await db.counts(id)).toEqual(new Map([[id, 1]]));
  const starts = await db.pool.query<{ starts: number }>(
    `SELECT starts FROM ${db.schema}.starts WHERE consumer = $1 AND message_id = $2`,
    [consumer, id],
  );
  // At most the one start that ran the handler (a redelivery, so counted).
  expect(starts.rows[0]?.starts ?? 0).toBeLessThanOrEqual(1);
});
