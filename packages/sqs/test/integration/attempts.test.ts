import type { Message } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb, type TestDb } from '../../../../test/support/index.js';
import { createSqsConsumer, readDeadLetter, type SqsConsumer } from '../../src/index.js';
import { drain, queues, sendAll, sqsClient, unique, waitFor } from './fixtures/env.js';
import { startOnce } from './fixtures/once-consumer.js';

// The attempt number that decides `max-attempts` is the number of real runs of the handler,
// counted in Postgres, never SQS's ApproximateReceiveCount alone: in a FIFO group, a message
// waiting behind a failing one is received again and again without running, and those receives
// must not spend its attempts (issue #12).

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-attempts');
let db: TestDb;
const consumers: SqsConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('sqs_attempts', 12);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await q.drop();
  await db.close();
  client.destroy();
});

/** Collects the dead-letter copies of `dlq` until `n` have arrived. */
async function deadLetters(dlq: string, n: number): Promise<Message[]> {
  const dead: Message[] = [];
  await waitFor(
    async () => {
      dead.push(...(await drain(client, dlq, 300)));
      return dead.length >= n;
    },
    60_000,
    `${n} dead letters`,
  );
  return dead;
}

it('a message redelivered behind a failing neighbour, run once, is at attempt 1; attempts follow real runs', async () => {
  const prefix = `${run}-behind`;
  const url = await q.create(`${prefix}.fifo`);
  const dlq = await q.create(`${prefix}-dlq.fifo`);
  const first = `${prefix}-1`;
  const second = `${prefix}-2`;
  // The first message fails transiently twice, then succeeds; the second fails transiently on its
  // first run, then succeeds. With maxAttempts 3 both must end processed: the second is received
  // three times behind the first before it ever runs.
  await sendAll(client, url, [
    { body: '{"n":1}', id: first, group: 'g', dedup: first },
    { body: '{"n":2}', id: second, group: 'g', dedup: second },
  ]);
  const seen = new Map<string, number[]>([
    [first, []],
    [second, []],
  ]);
  const c = await startOnce(client, db, url, consumers, {
    consumer: 'behind',
    maxAttempts: 3,
    retryDelayMs: () => 0,
    deadLetterQueueUrl: dlq,
    handler: async (envelope, { tx, id, attempt }) => {
      const runs = seen.get(id)!;
      runs.push(attempt);
      if (id === first && runs.length <= 2) throw new Error(`transient ${runs.length}`);
      if (id === second && runs.length === 1) throw new Error('transient once');
      await db.record(tx, id, envelope.key, runs.length);
    },
  });
  const failed: string[] = [];
  c.inbox.on('message:failed', (e) => failed.push(`${e.id}: ${e.reason}`));
  await waitFor(async () => (await db.counts(`${prefix}-`)).size === 2, 60_000, 'both messages processed');
  await waitFor(async () => (await q.depth(url)) === 0, 30_000, 'the queue to empty');
  expect(failed).toEqual([]);
  expect(await db.check([first, second], true)).toMatchObject({ ok: true });
  // The attempt the handler (and core's verdict) saw is the run's number, from Postgres.
  expect(seen.get(first)).toEqual([1, 2, 3]);
  expect(seen.get(second)).toEqual([1, 2]);
  expect(await drain(client, dlq, 300)).toEqual([]);
});

it('a message that throws null on every run, behind another failing one, is dead-lettered after maxAttempts real runs', async () => {
  const prefix = `${run}-null`;
  const url = await q.create(`${prefix}.fifo`);
  const dlq = await q.create(`${prefix}-dlq.fifo`);
  const string = `${prefix}-string`;
  const nul = `${prefix}-null`;
  const object = `${prefix}-object`;
  const after = `${prefix}-after`;
  await sendAll(
    client,
    url,
    [string, nul, object, after].map((id, n) => ({ body: JSON.stringify({ n }), id, group: 'g', dedup: id })),
  );
  const runs = new Map<string, number[]>([string, nul, object, after].map((id) => [id, []]));
  await startOnce(client, db, url, consumers, {
    consumer: 'null',
    maxAttempts: 2,
    retryDelayMs: () => 0,
    deadLetterQueueUrl: dlq,
    handler: async (envelope, { tx, id, attempt }) => {
      runs.get(id)!.push(attempt);
      if (id === string) throw 'boom-string';
      if (id === nul) throw null;
      if (id === object) throw { code: 'E1', detail: 'x' };
      await db.record(tx, id, envelope.key, 1);
    },
  });
  const dead = await deadLetters(dlq, 3);
  await waitFor(async () => (await db.counts(`${prefix}-`)).size === 1, 30_000, 'the last message');
  expect(await db.counts(`${prefix}-`)).toEqual(new Map([[after, 1]]));
  // Each bad message ran maxAttempts (2) times, its attempts numbered by its own runs.
  expect(runs.get(string)).toEqual([1, 2]);
  expect(runs.get(nul)).toEqual([1, 2]);
  expect(runs.get(object)).toEqual([1, 2]);
  expect(runs.get(after)).toEqual([1]);
  const records = dead.map((m) => readDeadLetter(m)?.record);
  expect(
    records
      .map((r) => [r?.id, r?.reason, r?.attempts])
      .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
  ).toEqual(
    [
      [nul, 'max-attempts', 2],
      [object, 'max-attempts', 2],
      [string, 'max-attempts', 2],
    ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
  );
  const rows = await db.pool.query<{ message_id: string; attempts: number }>(
    `SELECT message_id, attempts FROM "${db.schema}".inbox WHERE consumer = 'null' AND status = 'failed' ORDER BY message_id`,
  );
  expect(rows.rows.map((r) => [r.message_id, r.attempts])).toEqual(
    [nul, object, string].sort().map((id) => [id, 2]),
  );
});

it('runs that fail on the environment (a deadlock) are not counted: only the message’s own failures spend attempts', async () => {
  const prefix = `${run}-env`;
  const url = await q.create(`${prefix}.fifo`);
  const dlq = await q.create(`${prefix}-dlq.fifo`);
  const id = `${prefix}-1`;
  await sendAll(client, url, [{ body: '{"n":1}', id, group: 'g', dedup: id }]);
  // Core runs a transaction that lost a race (40P01) again at once, up to three times per
  // delivery, then returns an unspent retry. Two deliveries end that way, then the handler fails
  // on its own once, then succeeds: with maxAttempts 2 that is attempt 1, then 2.
  const calls: number[] = [];
  const c = await startOnce(client, db, url, consumers, {
    consumer: 'env',
    maxAttempts: 2,
    retryDelayMs: () => 0,
    deadLetterQueueUrl: dlq,
    handler: async (envelope, { tx, id: got, attempt }) => {
      calls.push(attempt);
      if (calls.length <= 6) throw Object.assign(new Error('deadlock detected'), { code: '40P01' });
      if (calls.length === 7) throw new Error('the message’s own transient failure');
      await db.record(tx, got, envelope.key, 1);
    },
  });
  const outcomes: string[] = [];
  c.inbox.on('message:retry', (e) => outcomes.push(`retry spent=${e.spent}`));
  c.inbox.on('message:failed', (e) => outcomes.push(`failed ${e.reason}`));
  await waitFor(async () => (await db.counts(id)).size === 1, 60_000, 'the message to be processed');
  expect(outcomes).toEqual(['retry spent=false', 'retry spent=false', 'retry spent=true']);
  expect(calls).toEqual([1, 1, 1, 1, 1, 1, 1, 2]);
  expect(await db.counts(id)).toEqual(new Map([[id, 1]]));
  expect(await drain(client, dlq, 300)).toEqual([]);
});

it('the messages of a FIFO group sent back behind a retried one are reported not run (behind), then run once', async () => {
  const prefix = `${run}-notrun`;
  const url = await q.create(`${prefix}.fifo`);
  const ids = [1, 2, 3].map((n) => `${prefix}-${n}`);
  await sendAll(
    client,
    url,
    ids.map((id, n) => ({ body: `{"n":${n + 1}}`, id, group: 'g', dedup: id })),
  );
  let firstRuns = 0;
  const c = createSqsConsumer({
    client,
    queueUrl: url,
    pool: db.pool,
    schema: db.schema,
    consumer: 'not-run',
    deadLetterQueueUrl: false,
    waitTimeSeconds: 1,
    visibilityTimeoutS: 10,
    retryDelayMs: () => 0,
    handler: async (envelope, { tx, id }) => {
      if (id === ids[0] && ++firstRuns === 1) throw new Error('transient once');
      await db.record(tx, id, envelope.key, 1);
    },
  });
  consumers.push(c);
  const notRun: string[] = [];
  c.inbox.on('message:not-run', (e) => notRun.push(`${e.id}: ${e.why}`));
  await c.start();
  await waitFor(async () => (await db.counts(`${prefix}-`)).size === 3, 60_000, 'the group processed');
  expect(await db.check(ids, true)).toMatchObject({ ok: true });
  // The first receive ran the first message only; the two behind it went back unrun.
  expect(notRun.slice(0, 2)).toEqual([`${ids[1]}: behind`, `${ids[2]}: behind`]);
  expect(notRun.filter((e) => e.startsWith(`${ids[0]}:`))).toEqual([]);
});
