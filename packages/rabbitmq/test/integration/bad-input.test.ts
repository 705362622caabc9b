import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { freshDb } from '../../../../test/support/index.js';
import {
  createRabbitConsumer,
  createRabbitPublisher,
  jsonHandler,
  type RabbitConsumer,
  RabbitErrorCode,
} from '../../src/index.js';
import { AMQP_URL, amqpAdmin, recordOf, unique, waitFor } from './fixtures/env.js';

let db: Awaited<ReturnType<typeof freshDb>>;
let admin: Awaited<ReturnType<typeof amqpAdmin>>;
const run = unique('rmq-bad');
const consumers: RabbitConsumer[] = [];
const queues: string[] = [];

beforeAll(async () => {
  db = await freshDb('rmq_bad', 6);
  admin = await amqpAdmin(run);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  for (const q of queues) await admin.dropTopology(q);
  await admin.close();
  await db.close();
});

function consumer(queue: string, patch: Record<string, unknown> = {}) {
  const c = createRabbitConsumer({
    url: AMQP_URL,
    queue,
    pool: db.pool,
    schema: db.schema,
    consumer: queue,
    socketOptions: { clientProperties: { connection_name: `${run}-${queue}` } },
    handler: jsonHandler<{ n: number }>(async (body, _e, { tx, id }) => {
      await tx.query(`INSERT INTO ${db.effects} (id) VALUES ($1)`, [`${id}:${body.n}`]);
    }),
    ...patch,
  });
  consumers.push(c);
  queues.push(queue);
  return c;
}

it('no id, oversize id and a non-JSON body are dead-lettered with a named reason; good ones still run', async () => {
  const queue = unique(`${run}-input`);
  await consumer(queue).start();
  await admin.publish(queue, '{"n":1}'); // no messageId, no header
  // AMQP caps messageId at 255 characters; a header can carry a longer one.
  await admin.publish(queue, '{"n":2}', { headers: { 'message-id': 'x'.repeat(600) } });
  await admin.publish(queue, 'not json', { messageId: 'nj' });
  await admin.publish(queue, '{"n":4}', { headers: { 'message-id': 'from-header' } });
  await waitFor(async () => (await admin.count(`${queue}.dead`)) === 3, 20_000, 'three dead letters');
  const dead = await admin.drain(`${queue}.dead`);
  const byBody = new Map(dead.map((m) => [m.content.toString(), recordOf(m)]));
  expect(byBody.get('{"n":1}')).toMatchObject({
    reason: 'invalid-id',
    error: { code: 'INVALID_ID', message: expect.stringMatching(/missing/) },
    origin: { broker: 'rabbitmq', queue },
  });
  expect(byBody.get('{"n":2}')).toMatchObject({
    reason: 'invalid-id',
    error: { message: expect.stringMatching(/600 characters; the maximum is 512/) },
  });
  expect(byBody.get('not json')).toMatchObject({
    reason: 'permanent',
    error: { code: 'PERMANENT', message: expect.stringMatching(/not valid JSON/) },
  });
  await waitFor(async () => (await db.counts()).has('from-header:4'), 10_000, 'the good one');
});

it('with no logger, a dead letter is one console.warn line with id, reason and destination', async () => {
  const queue = unique(`${run}-line`);
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
  try {
    await consumer(queue).start();
    await admin.publish(queue, 'not json', { messageId: 'line-1' });
    await waitFor(async () => (await admin.count(`${queue}.dead`)) === 1, 20_000, 'the dead letter');
    const lines = warn.mock.calls.map((c) => c.join(' ')).filter((l) => l.includes(queue));
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(
          `message dead-lettered .*id=line-1 reason=permanent destination=${queue}\\.dlx recorded=true attempt=1 of \\d+ error=\\S.* queue=${queue} delivery=\\d+$`,
        ),
      ),
    ]);
  } finally {
    warn.mockRestore();
  }
});

it('with recordFailed off, the dead letter says it is not recorded: its event and its line', async () => {
  // Core's settle plan says whether a failure was written down; it said `recorded: true` for any
  // permanent failure with an id, although with recordFailed off no row is written.
  const queue = unique(`${run}-unrecorded`);
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
  try {
    const c = consumer(queue, { recordFailed: false });
    const events: unknown[] = [];
    c.on('message:dead-lettered', (e) => events.push(e));
    await c.start();
    await admin.publish(queue, 'not json', { messageId: 'unrec-1' });
    await waitFor(async () => (await admin.count(`${queue}.dead`)) === 1, 20_000, 'the dead letter');
    await waitFor(async () => events.length === 1, 5_000, 'the event');
    expect(events).toEqual([
      expect.objectContaining({ id: 'unrec-1', reason: 'permanent', recorded: false }),
    ]);
    const lines = warn.mock.calls.map((c) => c.join(' ')).filter((l) => l.includes(queue));
    expect(lines).toEqual([
      expect.stringMatching(
        /message dead-lettered .*id=unrec-1 reason=permanent .* recorded=false attempt=1 of \d+ error=\S/,
      ),
    ]);
    const rows = await db.pool.query(`SELECT 1 FROM ${db.schema}.inbox WHERE consumer = $1`, [queue]);
    expect(rows.rowCount).toBe(0);
  } finally {
    warn.mockRestore();
  }
});

it('idOf overrides the id the message carries, on every broker', async () => {
  const queue = unique(`${run}-idof`);
  await consumer(queue, { idOf: (e: { body: Buffer }) => `body-${JSON.parse(e.body.toString()).n}` }).start();
  await admin.publish(queue, '{"n":7}');
  await admin.publish(queue, '{"n":7}');
  await admin.publish(queue, '{"n":8}', { messageId: 'explicit' });
  await waitFor(async () => (await db.counts()).has('body-8:8'), 10_000, 'processed');
  await waitFor(async () => (await admin.count(queue)) === 0, 10_000, 'drained');
  const counts = await db.counts();
  expect(counts.get('body-7:7')).toBe(1);
  expect(counts.has('explicit:8')).toBe(false);
});

it('a queue that does not exist is a clear error at start (assertQueue: false)', async () => {
  const queue = unique(`${run}-missing`);
  const c = consumer(queue, { assertQueue: false });
  await expect(c.start()).rejects.toMatchObject({
    code: RabbitErrorCode.QueueNotFound,
    message: expect.stringContaining(`queue '${queue}' does not exist`),
  });
  expect(c.state).toBe('failed');
});

it('an unreachable broker is a clear, retryable error at start', async () => {
  const c = consumer(unique(`${run}-unreachable`), { url: 'amqp://guest:guest@127.0.0.1:1' });
  await expect(c.start()).rejects.toMatchObject({ code: RabbitErrorCode.Connect, retryable: true });
});

it('a queue declared with other arguments is a topology error naming the queue', async () => {
  const queue = unique(`${run}-classic`);
  queues.push(queue);
  await admin.ch.assertQueue(queue, { durable: true }); // classic
  const c = consumer(queue, { queueType: 'quorum' });
  const err = await c.start().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toMatchObject({ code: RabbitErrorCode.Topology });
  const message = (err as Error).message;
  expect(message).toContain('PRECONDITION_FAILED');
  // The refusal says which option matches the queue that exists.
  expect(message).toContain(`queue '${queue}' exists as a classic queue`);
  expect(message).toContain("pass queueType: 'classic'");
});

it('a quorum queue met with queueType: classic suggests quorum', async () => {
  const queue = unique(`${run}-quorum`);
  queues.push(queue);
  await admin.ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  const c = consumer(queue, { queueType: 'classic' });
  await expect(c.start()).rejects.toMatchObject({
    code: RabbitErrorCode.Topology,
    message: expect.stringContaining("pass queueType: 'quorum'"),
  });
});

it('invalid options name the field', () => {
  expect(() => consumer('q', { prefetch: -1 })).toThrow(/option 'prefetch'/);
  expect(() => consumer('q', { url: 'nope' })).toThrow(/option 'url'/);
  expect(() => consumer('q', { pool: undefined })).toThrow(/option 'pool'/);
});

it('publisher: confirmed, persistent, messageId = outbox id; an unroutable publish is an error, not a success', async () => {
  const queue = unique(`${run}-outbox`);
  queues.push(queue);
  await admin.ch.assertQueue(queue, { durable: true });
  const publisher = createRabbitPublisher({
    url: AMQP_URL,
    socketOptions: { clientProperties: { connection_name: `${run}-publisher` } },
  });
  try {
    await publisher.publishOne({
      id: 'ob-1',
      destination: '',
      key: queue,
      body: '{"n":1}',
      headers: { trace: 't' },
    });
    const [m] = await admin.drain(queue);
    expect(m!.properties).toMatchObject({
      messageId: 'ob-1',
      deliveryMode: 2,
      contentType: 'application/json',
      headers: { trace: 't' },
    });
    await expect(
      publisher.publishOne({ id: 'ob-2', destination: '', key: unique('nowhere'), body: '{}' }),
    ).rejects.toMatchObject({ code: RabbitErrorCode.Unroutable });
    // Routed and unrouted publishes in flight together are told apart.
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        publisher.publishOne({
          id: `ob-${i}`,
          destination: '',
          key: i % 2 ? queue : `${queue}-missing`,
          body: `${i}`,
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? 'fulfilled' : 'rejected')),
    );
    expect(await admin.count(queue)).toBe(10);
    // A non-existent exchange closes the channel; the publisher reopens on the next publish.
    await expect(
      publisher.publishOne({ id: 'ob-x', destination: unique('no-exchange'), body: '{}' }),
    ).rejects.toMatchObject({
      code: RabbitErrorCode.ChannelClosed,
    });
    await publisher.publishOne({ id: 'ob-after', destination: '', key: queue, body: '{}' });
    expect(await admin.count(queue)).toBe(11);
  } finally {
    await publisher.stop();
  }
});

it('publisher → consumer: a relay re-send of the same outbox id has one effect', async () => {
  const queue = unique(`${run}-chain`);
  const c = consumer(queue);
  await c.start();
  const publisher = createRabbitPublisher({ url: AMQP_URL });
  try {
    for (let i = 0; i < 3; i++)
      await publisher.publishOne({ id: 'row-42', destination: '', key: queue, body: '{"n":42}' });
  } finally {
    await publisher.stop();
  }
  await waitFor(
    async () => (await admin.count(queue)) === 0 && c.health().unsettled === 0,
    10_000,
    'drained',
  );
  expect((await db.counts()).get('row-42:42')).toBe(1);
});

it('two different invalid UTF-8 ids are each refused, never one taken for the other (issue #12, defect 5)', async () => {
  const queue = unique(`${run}-utf8`);
  await consumer(queue).start();
  // amqplib decodes both to '\ufffda': without the check the second would be a `duplicate`.
  await admin.publish(queue, '{"n":1}', { headers: { 'message-id': Buffer.from([0xff, 0x61]) } });
  await admin.publish(queue, '{"n":2}', { headers: { 'message-id': Buffer.from([0xc3, 0x28, 0x61]) } });
  await admin.publish(queue, '{"n":3}', { messageId: 'fine' });
  await waitFor(async () => (await admin.count(`${queue}.dead`)) === 2, 20_000, 'two dead letters');
  const dead = await admin.drain(`${queue}.dead`);
  for (const m of dead) {
    expect(recordOf(m)).toMatchObject({
      reason: 'invalid-id',
      error: { message: expect.stringMatching(/not valid UTF-8/) },
    });
  }
  expect(dead.map((m) => m.content.toString()).sort()).toEqual(['{"n":1}', '{"n":2}']);
  await waitFor(async () => (await db.counts()).has('fine:3'), 10_000, 'the good one');
});

it('a body with a NUL byte that jsonHandler refuses is recorded failed and dead-lettered (issue #12, defect 1)', async () => {
  const queue = unique(`${run}-nul`);
  await consumer(queue, { maxAttempts: 2 }).start();
  await admin.publish(queue, '{"n":\u00001}', { messageId: 'nul-body' });
  await admin.publish(queue, '{"n":2}', { messageId: 'after-nul' });
  await waitFor(async () => (await admin.count(`${queue}.dead`)) === 1, 20_000, 'one dead letter');
  const [dead] = await admin.drain(`${queue}.dead`);
  expect(recordOf(dead!)).toMatchObject({ reason: 'permanent', id: 'nul-body' });
  const row = await db.pool.query(`SELECT status FROM ${db.schema}.inbox WHERE message_id = 'nul-body'`);
  expect(row.rows).toEqual([{ status: 'failed' }]);
  await waitFor(async () => (await db.counts()).has('after-nul:2'), 10_000, 'the next one');
});
