import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb, type TestDb } from '../../../../test/support/index.js';
import type { SqsConsumer } from '../../src/index.js';
import { queues, sendAll, sleep, sqsClient, unique, waitFor } from './fixtures/env.js';
import { startNaiveConsumer } from './fixtures/naive-consumer.js';
import { effectHandler, startOnce } from './fixtures/once-consumer.js';

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-vis');
let db: TestDb;
const consumers: SqsConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('sqs_vis', 12);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await q.drop();
  await db.close();
  client.destroy();
});

const SLOW_MS = 5_000;
const VISIBILITY_S = 2;

/** One slow message through a consumer; counts handler runs and redelivered receives. */
async function slowOne(name: string, options: Record<string, unknown>) {
  const prefix = `${run}-${name}`;
  const url = await q.create(prefix, { VisibilityTimeout: String(VISIBILITY_S) });
  let runs = 0;
  let redelivered = 0;
  const consumer = await startOnce(client, db, url, consumers, {
    consumer: name,
    visibilityTimeoutS: VISIBILITY_S,
    lockTimeoutMs: 30_000,
    handler: effectHandler(db, async () => {
      runs++;
      await sleep(SLOW_MS);
    }),
    ...options,
  });
  consumer.on('received', (e) => {
    redelivered += e.redelivered;
  });
  let duplicates = 0;
  consumer.inbox.on('message:duplicate', () => duplicates++);
  await sendAll(client, url, [{ body: '{"n":1}', id: `${prefix}-1` }]);
  await waitFor(async () => (await db.counts(`${prefix}-`)).size === 1, 30_000, 'the effect');
  await waitFor(async () => (await q.depth(url)) === 0 && consumer.health().held === 0, 30_000, 'settled');
  await consumer.stop();
  return { counts: await db.counts(`${prefix}-`), runs, redelivered, duplicates };
}

it('heartbeat off: the visibility expires mid-handler, a second copy arrives while the first runs, one effect', async () => {
  const r = await slowOne('off', { heartbeat: false });
  expect(r.redelivered).toBeGreaterThanOrEqual(1); // the copy arrived...
  expect(r.duplicates).toBeGreaterThanOrEqual(1); // ...waited on the claim, and was a duplicate
  expect(r.runs).toBe(1);
  expect([...r.counts.values()]).toEqual([1]);

  // Control: two naive consumers; the second receives the copy and repeats the effect.
  const prefix = `${run}-naive`;
  const url = await q.create(prefix, { VisibilityTimeout: String(VISIBILITY_S) });
  await sendAll(client, url, [{ body: '{"n":1}', id: `${prefix}-1` }]);
  const naive = [1, 2].map(() =>
    startNaiveConsumer(client, db, url, { visibilityTimeoutS: VISIBILITY_S, handlerDelayMs: SLOW_MS }),
  );
  await waitFor(
    async () => ((await db.counts(`${prefix}-`)).get(`${prefix}-1`) ?? 0) >= 2,
    30_000,
    'naive copy',
  );
  await Promise.all(naive.map((n) => n.stop()));
  expect((await db.counts(`${prefix}-`)).get(`${prefix}-1`)).toBeGreaterThan(1);
});

it('heartbeat on: visibility is extended while the handler runs, no second copy', async () => {
  const r = await slowOne('on', { heartbeat: true, heartbeatIntervalMs: 500 });
  expect(r.redelivered).toBe(0);
  expect(r.duplicates).toBe(0);
  expect(r.runs).toBe(1);
  expect([...r.counts.values()]).toEqual([1]);
});

it('heartbeat with a cap: extension stops at maxHeldMs, the copy that follows is a duplicate', async () => {
  const r = await slowOne('cap', { heartbeat: true, heartbeatIntervalMs: 500, maxHeldMs: 1_500 });
  expect(r.redelivered).toBeGreaterThanOrEqual(1);
  expect(r.runs).toBe(1);
  expect([...r.counts.values()]).toEqual([1]);
});
