import { fileURLToPath } from 'node:url';
import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { createInbox, type Handler, type Outcome } from '@once/core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDb, killAllChildren, startChild, type TestDb } from '../../../../test/support/index.js';
import { envelopeOf } from '../../src/envelope-of.js';
import type { SqsConsumer } from '../../src/index.js';
import { queues, sendAll, sleep, sqsClient, unique, waitFor } from './fixtures/env.js';
import { startOnce } from './fixtures/once-consumer.js';

// Lease mode end to end on ElasticMQ and Postgres: core's lease clock drives the message's
// visibility (one clock), so a step longer than the queue's visibility timeout gets no second
// copy; a worker SIGKILLed inside a step is taken over after its lease and resumes at that step.

const CHILD = fileURLToPath(new URL('./fixtures/lease-child.mjs', import.meta.url));
const client = sqsClient();
const q = queues(client);
const run = unique('sqs-lease');
let db: TestDb;
const consumers: SqsConsumer[] = [];

const VISIBILITY_S = 2;
const LEASE_MS = 4_000;
const HEARTBEAT_MS = 1_000;
/** Longer than the visibility timeout and than the lease: only renewals keep the message. */
const SLOW_STEP_MS = 7_000;

beforeAll(async () => {
  db = await freshDb('sqs_lease', 12);
  await db.pool.query(`CREATE TABLE "${db.schema}".calls (message_id text, step text, key text)`);
});
afterAll(async () => {
  await killAllChildren();
  for (const c of consumers) await c.stop();
  await q.drop();
  await db.close();
  client.destroy();
});

/** The message's one slow step and its final effect; counts the step's calls. */
function slowHandler(calls: { n: number }): Handler {
  return async (envelope, ctx) => {
    await ctx.step('slow', async () => {
      calls.n++;
      await sleep(SLOW_STEP_MS);
      return 'done';
    });
    await db.record(ctx.tx, ctx.id, envelope.key, 1);
  };
}

/** Counts the SQS calls a consumer makes, by command name. */
function spied(inner: SQSClient): { client: SQSClient; sent: Map<string, number> } {
  const sent = new Map<string, number>();
  const client = new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop !== 'send') return Reflect.get(target, prop, receiver);
      return (command: object, ...rest: unknown[]) => {
        const name = command.constructor.name;
        sent.set(name, (sent.get(name) ?? 0) + 1);
        return (target.send as (...a: unknown[]) => unknown).call(target, command, ...rest);
      };
    },
  });
  return { client, sent };
}

it('a step longer than the visibility timeout: the lease clock keeps the message invisible, no second copy, one call', async () => {
  const prefix = `${run}-slow`;
  const url = await q.create(prefix, { VisibilityTimeout: String(VISIBILITY_S) });
  const calls = { n: 0 };
  const spy = spied(client);
  const consumer = await startOnce(spy.client, db, url, consumers, {
    consumer: 'slow',
    mode: { lease: { leaseMs: LEASE_MS, heartbeatMs: HEARTBEAT_MS } },
    visibilityTimeoutS: VISIBILITY_S,
    // The adapter's own heartbeat is on and fast: it must leave the leased message alone.
    heartbeat: true,
    heartbeatIntervalMs: 500,
    handler: slowHandler(calls),
  });
  let redelivered = 0;
  let busy = 0;
  consumer.on('received', (e) => {
    redelivered += e.redelivered;
  });
  consumer.inbox.on('message:busy', () => busy++);
  await sendAll(client, url, [{ body: '{"n":1}', id: `${prefix}-1` }]);
  await waitFor(async () => (await db.counts(`${prefix}-`)).size === 1, 30_000, 'the effect');
  await waitFor(async () => (await q.depth(url)) === 0 && consumer.health().held === 0, 30_000, 'settled');
  await consumer.stop();

  expect(calls.n).toBe(1);
  expect(redelivered).toBe(0);
  expect(busy).toBe(0);
  expect([...(await db.counts(`${prefix}-`)).values()]).toEqual([1]);
  // One clock: the lease drove the visibility (the claim plus renewals over 7 s at 1 s), and
  // the adapter's batch heartbeat did not (at most once, in the moment before the claim).
  expect(spy.sent.get('ChangeMessageVisibilityCommand') ?? 0).toBeGreaterThanOrEqual(4);
  expect(spy.sent.get('ChangeMessageVisibilityBatchCommand') ?? 0).toBeLessThanOrEqual(1);
});

it('control: lease mode without the adapter hook (a bare receive loop) gets a second copy mid-step', async () => {
  const prefix = `${run}-bare`;
  const url = await q.create(prefix, { VisibilityTimeout: String(VISIBILITY_S) });
  const calls = { n: 0 };
  const inbox = createInbox({
    pool: db.pool,
    schema: db.schema,
    consumer: 'bare',
    mode: { lease: { leaseMs: LEASE_MS, heartbeatMs: HEARTBEAT_MS } },
    handler: slowHandler(calls),
  });
  await sendAll(client, url, [{ body: '{"n":1}', id: `${prefix}-1` }]);
  const outcomes: Outcome['status'][] = [];
  let copies = 0;
  const inFlight: Promise<void>[] = [];
  const until = Date.now() + 30_000;
  while (Date.now() < until && !outcomes.includes('processed')) {
    const res = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: VISIBILITY_S,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    for (const m of res.Messages ?? []) {
      if (Number(m.Attributes?.ApproximateReceiveCount) > 1) copies++;
      const envelope = envelopeOf(m, { queueUrl: url, idFrom: 'header', idHeader: 'message-id' });
      inFlight.push(
        inbox.process(envelope).then(async (o) => {
          outcomes.push(o.status);
          if (o.status === 'processed' || o.status === 'duplicate')
            // A later receive made this receipt stale: that is the two-clocks problem itself.
            await client
              .send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }))
              .catch(() => {});
        }),
      );
    }
  }
  await Promise.all(inFlight);
  // The visibility ran out while the step ran: a second copy was delivered (the lease still made
  // it `busy`, but the broker and the lease were two clocks).
  expect(copies).toBeGreaterThanOrEqual(1);
  expect(outcomes).toContain('busy');
  expect(outcomes).toContain('processed');
  expect(calls.n).toBe(1);
});

it('SIGKILL inside a step, restart: every recorded step ran once, the final effect exists once (control without steps repeats)', async () => {
  const N = 3;
  const setups = await Promise.all(
    (['steps', 'nosteps'] as const).map(async (kind) => {
      const prefix = `${run}-kill-${kind}`;
      const url = await q.create(prefix, { VisibilityTimeout: String(VISIBILITY_S) });
      const ids = Array.from({ length: N }, (_, k) => `${prefix}-${k}`);
      await sendAll(
        client,
        url,
        ids.map((id, k) => ({ body: `{"n":${k}}`, id })),
      );
      const env = (hangStep: string | undefined) => ({
        SQS_LEASE_CHILD: JSON.stringify({
          queueUrl: url,
          schema: db.schema,
          consumer: `kill-${kind}`,
          steps: kind === 'steps',
          leaseMs: 3_000,
          heartbeatMs: 1_000,
          visibilityTimeoutS: VISIBILITY_S,
          hangStep,
        }),
      });
      return { kind, prefix, url, ids, env };
    }),
  );
  // Run 1: every message stops inside step b (step a is done); SIGKILL there.
  await Promise.all(
    setups.map(async (s) => {
      const child = startChild({ script: CHILD, env: s.env('b') });
      const inStep = new Set<string>();
      await child.waitForLine((l) => {
        const j = l.json as { event?: string; id?: string } | undefined;
        if (j?.event === 'in-step' && j.id) inStep.add(j.id);
        return inStep.size === N;
      });
      await child.kill('SIGKILL');
    }),
  );
  // Run 2: a fresh worker takes each message over once its lease (and visibility) ran out.
  const children = setups.map((s) => startChild({ script: CHILD, env: s.env(undefined) }));
  for (const s of setups) {
    await waitFor(async () => (await db.counts(`${s.prefix}-`)).size === N, 60_000, `${s.kind} effects`);
    await waitFor(async () => (await q.depth(s.url)) === 0, 30_000, `${s.kind} queue drained`);
  }
  await Promise.all(children.map((c) => c.kill()));

  const callRows = await db.pool.query<{ message_id: string; step: string; n: string; keys: string }>(
    `SELECT message_id, step, count(*) AS n, count(DISTINCT key) AS keys FROM "${db.schema}".calls
     WHERE message_id LIKE $1 GROUP BY message_id, step`,
    [`${run}-kill-%`],
  );
  const callsOf = (id: string, step: string) =>
    Number(callRows.rows.find((r) => r.message_id === id && r.step === step)?.n ?? 0);
  const [steps, control] = setups;
  for (const id of steps!.ids) {
    // a was recorded before the kill and not called again; b (killed before its call) and c ran once.
    expect({ id, a: callsOf(id, 'a'), b: callsOf(id, 'b'), c: callsOf(id, 'c') }).toEqual({
      id,
      a: 1,
      b: 1,
      c: 1,
    });
  }
  expect(await db.check(steps!.ids)).toMatchObject({ ok: true, total: N });
  // Control: the same handler without ctx.step calls a again after the kill.
  for (const id of control!.ids) expect(callsOf(id, 'a')).toBe(2);
  expect(await db.check(control!.ids)).toMatchObject({ ok: true, total: N });
  console.log(
    `[sqs lease SIGKILL] ${N} msgs killed in step b: step calls a/b/c = 1/1/1 each; control without steps called a twice for ${control!.ids.length} of ${N}`,
  );
});
