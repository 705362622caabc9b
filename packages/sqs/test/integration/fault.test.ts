import { afterAll, beforeAll, expect, it } from 'vitest';
import { FaultProxy, freshDb, type TestDb } from '../../../../test/support/index.js';
import type { SqsConsumer } from '../../src/index.js';
import { queues, SCALE, SQS_ENDPOINT, sendAll, sleep, sqsClient, unique, waitFor } from './fixtures/env.js';
import { startNaiveConsumer } from './fixtures/naive-consumer.js';
import { startOnce } from './fixtures/once-consumer.js';

const admin = sqsClient();
const q = queues(admin);
const run = unique('sqs-cut');
let db: TestDb;
let proxy: FaultProxy;
const consumers: SqsConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('sqs_cut', 12);
  proxy = await FaultProxy.start(new URL(SQS_ENDPOINT).host);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await proxy.close();
  await q.drop();
  await db.close();
  admin.destroy();
});

const N = Math.round(600 * SCALE);
const GROUPS = 10;

/** Cuts every connection a few times and refuses new ones for a while, as progress is made. */
async function faults(progress: () => Promise<number>, total: number): Promise<void> {
  for (let k = 1; k <= 3; k++) {
    await waitFor(async () => (await progress()) >= (total * k) / 5, 60_000, `progress ${k}`);
    proxy.cutAll();
    proxy.refuse(true);
    await sleep(1_500);
    proxy.refuse(false);
  }
}

it('SQS endpoint cut and refused mid-run: recovers, exactly once, group order kept (naive control duplicates)', async () => {
  const prefix = `${run}-once`;
  const url = await q.create(`${prefix}.fifo`, { VisibilityTimeout: '2' });
  const ids = Array.from({ length: N }, (_, i) => `${prefix}-${i}`);
  await sendAll(
    admin,
    url,
    ids.map((id, i) => ({ id, body: JSON.stringify({ n: i }), group: `g${i % GROUPS}`, dedup: id })),
  );
  const client = sqsClient(proxy.url(SQS_ENDPOINT));
  let receiveErrors = 0;
  let deleteFailures = 0;
  const consumer = await startOnce(client, db, url, consumers, {
    consumer: 'cut',
    visibilityTimeoutS: 2,
    heartbeatIntervalMs: 500,
    receiveBackoffMs: 50,
    receiveBackoffMaxMs: 500,
  });
  consumer.on('receive:error', () => receiveErrors++);
  consumer.on('delete:failed', () => deleteFailures++);
  let sawUnhealthy = false;
  const watch = setInterval(() => {
    if (!consumer.health().healthy) sawUnhealthy = true;
  }, 100);
  await faults(async () => (await db.counts(`${prefix}-`)).size, N);
  await waitFor(async () => (await db.counts(`${prefix}-`)).size === N, 90_000, 'all ids');
  await waitFor(async () => (await q.depth(url)) === 0, 30_000, 'queue drained');
  clearInterval(watch);
  expect(await db.check(ids, true)).toMatchObject({ ok: true, total: N });
  expect(receiveErrors).toBeGreaterThan(0);
  expect(sawUnhealthy).toBe(true);
  expect(consumer.health().healthy).toBe(true); // and recovered
  expect(proxy.acceptedCount).toBeGreaterThan(3);
  await consumer.stop();
  client.destroy();
  console.log(
    `[sqs fault] ${N} msgs: ${receiveErrors} receive errors, ${deleteFailures} failed deletes, all once`,
  );

  // Control: the naive consumer through the same faults repeats effects whose delete was cut.
  const naivePrefix = `${run}-naive`;
  const naiveUrl = await q.create(`${naivePrefix}.fifo`, { VisibilityTimeout: '2' });
  const naiveIds = ids.map((id) => id.replace(prefix, naivePrefix));
  await sendAll(
    admin,
    naiveUrl,
    naiveIds.map((id, i) => ({ id, body: JSON.stringify({ n: i }), group: `g${i % GROUPS}`, dedup: id })),
  );
  const naiveClient = sqsClient(proxy.url(SQS_ENDPOINT));
  const naive = startNaiveConsumer(naiveClient, db, naiveUrl, { visibilityTimeoutS: 2, handlerDelayMs: 5 });
  await faults(async () => (await db.counts(`${naivePrefix}-`)).size, N);
  await waitFor(async () => (await db.counts(`${naivePrefix}-`)).size === N, 90_000, 'naive ids');
  await waitFor(async () => (await q.depth(naiveUrl)) === 0, 30_000, 'naive drained');
  await naive.stop();
  naiveClient.destroy();
  const check = await db.check(naiveIds);
  expect(check.duplicated.length).toBeGreaterThan(0);
});
