import { fileURLToPath } from 'node:url';
import { type Message, type MessageAttributeValue, SendMessageCommand } from '@aws-sdk/client-sqs';
import { PermanentError } from '@once/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb, killAllChildren, startChild, type TestDb } from '../../../../test/support/index.js';
import { jsonHandler, readDeadLetter, type SqsConsumer } from '../../src/index.js';
import { drain, queues, sendAll, sleep, sqsClient, unique, waitFor } from './fixtures/env.js';
import { effectHandler, startOnce } from './fixtures/once-consumer.js';

const CHILD = fileURLToPath(new URL('./fixtures/consumer-child.mjs', import.meta.url));
const client = sqsClient();
const q = queues(client);
const run = unique('sqs-poison');
let db: TestDb;
const consumers: SqsConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('sqs_poison', 12);
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await killAllChildren();
  await q.drop();
  await db.close();
  client.destroy();
});

/** The dead-letter record of a copy, its error flattened in: reason, attempts, name, message. */
const onceErrorOf = (m: Message) => {
  const record = readDeadLetter(m)?.record;
  return { reason: record?.reason, attempts: record?.attempts, ...record?.error };
};

describe('a poison message that throws', () => {
  it('goes to the dead-letter queue after maxAttempts with its error; its group resumes in order, others unaffected', async () => {
    const prefix = `${run}-throw`;
    const url = await q.create(`${prefix}.fifo`);
    const dlq = await q.create(`${prefix}-dlq.fifo`);
    const poison = `${prefix}-g1-3`;
    const ids: string[] = [];
    const items = [];
    for (let i = 0; i < 10; i++) {
      for (const g of ['g0', 'g1', 'g2']) {
        const id = `${prefix}-${g}-${i}`;
        if (id !== poison) ids.push(id);
        items.push({ body: JSON.stringify({ n: i }), id, group: g, dedup: id });
      }
    }
    await sendAll(client, url, items);
    let attempts = 0;
    await startOnce(client, db, url, consumers, {
      consumer: 'throw',
      maxAttempts: 3,
      retryDelayMs: () => 0,
      deadLetterQueueUrl: dlq,
      handler: effectHandler(db, (id) => {
        if (id === poison) {
          attempts++;
          throw new Error('boom: cannot handle this one');
        }
      }),
    });
    await waitFor(async () => (await db.counts(`${prefix}-`)).size === ids.length, 60_000, 'the others');
    expect(await db.check(ids, true)).toMatchObject({ ok: true });
    expect(attempts).toBe(3);
    const dead = await drain(client, dlq);
    expect(dead).toHaveLength(1);
    expect(dead[0]!.MessageAttributes?.['message-id']?.StringValue).toBe(poison);
    expect(onceErrorOf(dead[0]!)).toMatchObject({
      attempts: 3,
      reason: 'max-attempts',
      message: 'boom: cannot handle this one',
    });
    const row = await db.pool.query(`SELECT status, error FROM "${db.schema}".inbox WHERE message_id = $1`, [
      poison,
    ]);
    expect(row.rows[0]).toMatchObject({ status: 'failed', error: { reason: 'max-attempts' } });
  });

  it('with a redrive policy configured instead, SQS moves it to the redrive target', async () => {
    const prefix = `${run}-redrive`;
    const dlq = await q.create(`${prefix}-dlq`);
    const url = await q.create(prefix, {
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: await q.arn(dlq), maxReceiveCount: '4' }),
    });
    const poison = `${prefix}-p`;
    await sendAll(client, url, [
      { body: '{"n":1}', id: poison },
      { body: '{"n":2}', id: `${prefix}-ok` },
    ]);
    // deadLetterQueueUrl unset: the queue's redrive policy is found at start and used.
    await startOnce(client, db, url, consumers, {
      consumer: 'redrive',
      deadLetterQueueUrl: undefined,
      maxAttempts: 2,
      retryDelayMs: () => 0,
      handler: effectHandler(db, (id) => {
        if (id === poison) throw new Error('boom');
      }),
    });
    const dead: Message[] = [];
    await waitFor(
      async () => {
        dead.push(...(await drain(client, dlq, 300)));
        return dead.length > 0;
      },
      30_000,
      'redrive',
    );
    expect(dead[0]!.MessageAttributes?.['message-id']?.StringValue).toBe(poison);
    expect(await db.counts(`${prefix}-`)).toEqual(new Map([[`${prefix}-ok`, 1]]));
  });
});

it('a dead-lettered message with ten attributes keeps all ten: nine as attributes, the rest in the record', async () => {
  const prefix = `${run}-attrs`;
  const url = await q.create(prefix);
  const dlq = await q.create(`${prefix}-dlq`);
  const id = `${prefix}-1`;
  const original: Record<string, MessageAttributeValue> = {
    'message-id': { DataType: 'String', StringValue: id },
    'a-number': { DataType: 'Number', StringValue: '42.5' },
    'b-binary': { DataType: 'Binary', BinaryValue: Uint8Array.from([0, 1, 2, 254, 255]) },
    'c-custom': { DataType: 'Number.int', StringValue: '7' },
    'd-text': { DataType: 'String', StringValue: 'Binary:not binary, a colon inside' },
    'e-text': { DataType: 'String', StringValue: 'é ☃ 𝄞' },
    'f-text': { DataType: 'String', StringValue: 'f' },
    'g-image': { DataType: 'Binary.png', BinaryValue: Uint8Array.from([137, 80, 78, 71]) },
    'h-text': { DataType: 'String', StringValue: 'h' },
    // Sorts last, so it is the one that travels in the record's overflow.
    'z-trace': { DataType: 'String', StringValue: 'trace-id-123' },
  };
  await client.send(
    new SendMessageCommand({ QueueUrl: url, MessageBody: '{"n":1}', MessageAttributes: original }),
  );
  await startOnce(client, db, url, consumers, {
    consumer: 'attrs',
    deadLetterQueueUrl: dlq,
    handler: async () => {
      // U+FFFF is refused by SQS in attribute values: the record must escape it.
      throw new PermanentError('cannot handle \uffff this');
    },
  });
  const dead: Message[] = [];
  await waitFor(
    async () => {
      dead.push(...(await drain(client, dlq, 300)));
      return dead.length > 0;
    },
    30_000,
    'the dead letter',
  );
  const copy = dead[0]!;
  expect(Object.keys(copy.MessageAttributes ?? {})).toHaveLength(10);
  const read = readDeadLetter(copy)!;
  expect(read.record).toMatchObject({
    reason: 'permanent',
    attempts: 1,
    consumer: 'attrs',
    id,
    origin: { broker: 'sqs', queue: url },
    error: { name: 'PermanentError', message: 'cannot handle \uffff this' },
    overflow: { 'z-trace': 'String:trace-id-123' },
  });
  const norm = (a: Record<string, MessageAttributeValue>) =>
    Object.fromEntries(
      Object.entries(a).map(([k, v]) => [
        k,
        {
          type: v.DataType,
          value: v.BinaryValue ? Buffer.from(v.BinaryValue).toString('hex') : v.StringValue,
        },
      ]),
    );
  expect(norm(read.attributes)).toEqual(norm(original));
  expect(copy.Body).toBe('{"n":1}');
});

it('bad input is dead-lettered at once with a named reason: malformed JSON, missing id, oversize id', async () => {
  const prefix = `${run}-bad`;
  const url = await q.create(prefix);
  const dlq = await q.create(`${prefix}-dlq`);
  await sendAll(client, url, [
    { body: '{"n":1', id: `${prefix}-malformed` },
    { body: '{"n":2}' },
    { body: '{"n":3}', id: `${prefix}-${'x'.repeat(600)}` },
    { body: '{"n":4}', id: `${prefix}-good` },
  ]);
  let runs = 0;
  await startOnce(client, db, url, consumers, {
    consumer: 'bad',
    deadLetterQueueUrl: dlq,
    handler: jsonHandler<{ n: number }>(async (value, envelope, { tx, id }) => {
      runs++;
      await db.record(tx, id, envelope.key, value.n);
    }),
  });
  const dead: Message[] = [];
  await waitFor(
    async () => {
      dead.push(...(await drain(client, dlq, 300)));
      return dead.length >= 3;
    },
    30_000,
    'dead letters',
  );
  const reasons = dead.map((m) => [m.Body, onceErrorOf(m).reason, onceErrorOf(m).name]).sort();
  expect(reasons).toEqual([
    ['{"n":1', 'permanent', 'PermanentError'],
    ['{"n":2}', 'invalid-id', 'InvalidIdError'],
    ['{"n":3}', 'invalid-id', 'InvalidIdError'],
  ]);
  for (const m of dead) expect(onceErrorOf(m).attempts).toBe(1);
  await waitFor(async () => (await db.counts(`${prefix}-good`)).size === 1, 10_000, 'the good one');
  expect(runs).toBe(1); // only the good one got past jsonHandler's parse
});

it('process.exit() inside a receive of 10: 9 effects, 1 dead letter (naive control never gets past it)', async () => {
  const prefix = `${run}-exit`;
  const url = await q.create(`${prefix}.fifo`, { VisibilityTimeout: '2' });
  const dlq = await q.create(`${prefix}-dlq.fifo`);
  const ids = Array.from({ length: 10 }, (_, i) => `${prefix}-${i}`);
  const poison = ids[4]!;
  await sendAll(
    client,
    url,
    ids.map((id, i) => ({ body: JSON.stringify({ n: i }), id, group: 'g', dedup: id })),
  );
  const env = (mode: string, queueUrl: string) => ({
    SQS_CHILD: JSON.stringify({
      mode,
      queueUrl,
      dlqUrl: dlq,
      schema: db.schema,
      consumer: 'exit',
      poisonId: poison,
      maxAttempts: 2,
      visibilityTimeoutS: 2,
    }),
  });
  const child = startChild({ script: CHILD, env: env('once', url) });
  const good = ids.filter((id) => id !== poison);
  const deadline = Date.now() + 60_000;
  while ((await db.counts(`${prefix}-`)).size < good.length || (await q.depth(url)) > 0) {
    if (Date.now() > deadline) throw new Error(`not done after 60 s; stderr: ${child.stderr.slice(-2000)}`);
    if (!child.running) child.start(); // the poison killed it: restart, as an orchestrator would
    await sleep(200);
  }
  await child.kill();
  expect(await db.check(good, true)).toMatchObject({ ok: true });
  expect(child.runs).toBeGreaterThanOrEqual(3); // attempt 1 and 2 died; attempt 3 dead-lettered it
  const dead = await drain(client, dlq);
  expect(dead.map((m) => m.MessageAttributes?.['message-id']?.StringValue)).toEqual([poison]);
  expect(onceErrorOf(dead[0]!)).toMatchObject({ reason: 'max-attempts', name: 'AttemptsExhaustedError' });

  // Control: the naive consumer dies on the same message every time and repeats the ones before it.
  const naivePrefix = `${prefix}-naive`;
  const naiveUrl = await q.create(`${naivePrefix}.fifo`, { VisibilityTimeout: '2' });
  const naiveIds = ids.map((id) => id.replace(prefix, naivePrefix));
  await sendAll(
    client,
    naiveUrl,
    naiveIds.map((id, i) => ({ body: JSON.stringify({ n: i }), id, group: 'g', dedup: id })),
  );
  const naive = startChild({
    script: CHILD,
    env: {
      SQS_CHILD: JSON.parse(JSON.stringify(env('naive', naiveUrl)).replace(poison, naiveIds[4]!)).SQS_CHILD,
    },
  });
  for (let round = 0; round < 3; round++) {
    await naive.waitForExit(30_000);
    if (round < 2) naive.start();
  }
  const counts = await db.counts(`${naivePrefix}-`);
  expect(counts.get(naiveIds[0]!)).toBe(3); // repeated every round
  expect(counts.has(naiveIds[5]!)).toBe(false); // never reached
});

it('standard queue: process.exit() among 9 slow neighbours; only the killer is dead-lettered, after its own starts', async () => {
  // Standard queues run fresh messages in parallel, so the killer dies with its neighbours in
  // flight, and every death raises all their receive counts. Only starts counted in Postgres
  // while a redelivered message ran alone decide; no neighbour may reach the dead-letter queue.
  const prefix = `${run}-std-exit`;
  const url = await q.create(prefix, { VisibilityTimeout: '2' });
  const dlq = await q.create(`${prefix}-dlq`);
  const ids = Array.from({ length: 10 }, (_, i) => `${prefix}-${i}`);
  const poison = ids[4]!;
  await sendAll(
    client,
    url,
    ids.map((id, i) => ({ body: JSON.stringify({ n: i }), id })),
  );
  const child = startChild({
    script: CHILD,
    env: {
      SQS_CHILD: JSON.stringify({
        queueUrl: url,
        dlqUrl: dlq,
        schema: db.schema,
        consumer: 'std-exit',
        poisonId: poison,
        maxAttempts: 2,
        visibilityTimeoutS: 2,
        handlerDelayMs: 400,
      }),
    },
  });
  const good = ids.filter((id) => id !== poison);
  const deadline = Date.now() + 90_000;
  while ((await db.counts(`${prefix}-`)).size < good.length || (await q.depth(url)) > 0) {
    if (Date.now() > deadline) throw new Error(`not done after 90 s; stderr: ${child.stderr.slice(-2000)}`);
    if (!child.running) child.start(); // the poison killed it: restart, as an orchestrator would
    await sleep(200);
  }
  await child.kill();
  expect(await db.check(good, false)).toMatchObject({ ok: true });
  const dead = await drain(client, dlq);
  expect(dead.map((m) => m.MessageAttributes?.['message-id']?.StringValue)).toEqual([poison]);
  expect(onceErrorOf(dead[0]!)).toMatchObject({ reason: 'max-attempts', name: 'AttemptsExhaustedError' });
  // 1 fresh run and 2 counted starts died; the 3rd start was refused.
  expect(child.runs).toBe(4);
});
