import { migrate, OnceError } from '@once/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqsConsumer, createSqsPublisher, type SqsConsumerOptions } from '../../src/index.js';
import { type Db, freshDb, queues, SQS_ENDPOINT, sqsClient, unique } from './fixtures/env.js';
import { effectHandler } from './fixtures/once-consumer.js';

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-bad');
let db: Db;

beforeAll(async () => {
  db = await freshDb('sqs_bad');
});
afterAll(async () => {
  await q.drop();
  await db.close();
  client.destroy();
});

function options(queueUrl: string, patch: Partial<SqsConsumerOptions> = {}): SqsConsumerOptions {
  return {
    client,
    queueUrl,
    pool: db.pool,
    schema: db.schema,
    consumer: 'bad',
    handler: effectHandler(db),
    deadLetter: 'discard',
    waitTimeSeconds: 0,
    ...patch,
  };
}

/** Starts a consumer expecting start() to fail; returns the error and checks nothing was left running. */
async function startFails(o: SqsConsumerOptions): Promise<OnceError> {
  const consumer = createSqsConsumer(o);
  const err = await consumer.start().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(consumer.state).toBe('failed');
  expect(consumer.health()).toMatchObject({ healthy: false, held: 0 });
  await consumer.stop();
  expect(OnceError.is(err)).toBe(true);
  return err as OnceError;
}

describe('start() refuses with a named error', () => {
  it('a queue URL that does not exist', async () => {
    const url = `${SQS_ENDPOINT}/000000000000/${run}-missing`;
    const err = await startFails(options(url));
    expect(err.code).toBe('QUEUE_NOT_FOUND');
    expect(err.message).toContain(url);
    expect(err.message).toMatch(/does not exist/);
  });

  it('an endpoint that does not answer', async () => {
    const dead = sqsClient('http://127.0.0.1:9');
    const err = await startFails(options(`http://127.0.0.1:9/000000000000/${run}`, { client: dead }));
    expect(err).toMatchObject({ code: 'SQS_UNAVAILABLE', retryable: true });
    dead.destroy();
  });

  it("idFrom 'deduplication-id' on a queue with content-based deduplication, or on a standard queue", async () => {
    const cbd = await q.create(`${run}-cbd.fifo`, { ContentBasedDeduplication: 'true' });
    const err = await startFails(options(cbd, { idFrom: 'deduplication-id' }));
    expect(err.code).toBe('QUEUE_MISMATCH');
    expect(err.message).toMatch(/content-based deduplication/);
    const std = await q.create(`${run}-std`);
    expect((await startFails(options(std, { idFrom: 'deduplication-id' }))).code).toBe('QUEUE_MISMATCH');
    // The same option on a FIFO queue without content-based dedup starts.
    const fifo = await q.create(`${run}-ok.fifo`);
    const ok = createSqsConsumer(options(fifo, { idFrom: 'deduplication-id' }));
    await ok.start();
    expect(ok.health()).toMatchObject({ state: 'running', healthy: true });
    await ok.stop();
    expect(ok.state).toBe('stopped');
  });

  it('no dead-letter policy anywhere, or a dead-letter queue that does not exist', async () => {
    const url = await q.create(`${run}-nodlq`);
    const { deadLetter: _, ...noDeadLetter } = options(url);
    const err = await startFails(noDeadLetter);
    expect(err.code).toBe('INVALID_OPTION');
    expect(err.message).toMatch(/^options\.deadLetter/);
    const missing = `${SQS_ENDPOINT}/000000000000/${run}-nodlq-target`;
    const err2 = await startFails(options(url, { deadLetter: { queueUrl: missing } }));
    expect(err2.code).toBe('QUEUE_NOT_FOUND');
    expect(err2.message).toMatch(/^deadLetter\.queueUrl/);
  });

  it('a schema that is not installed', async () => {
    const url = await q.create(`${run}-noschema`);
    const err = await startFails(options(url, { schema: `${db.schema}_nope` }));
    expect(err.code).toBe('SCHEMA_NOT_INSTALLED');
    await migrate(db.pool, { schema: db.schema }); // idempotent: the real schema is fine
  });
});

it('invalid options throw at construction, naming the field', () => {
  expect(() => createSqsConsumer(options('not a url'))).toThrow(/^options\.queueUrl/);
  expect(() => createSqsConsumer(options(`${SQS_ENDPOINT}/q`, { concurrency: 0 }))).toThrow(
    /^options\.concurrency/,
  );
});

it('a FIFO publish without a group id is refused by name, before SQS sees it', async () => {
  const url = await q.create(`${run}-pub.fifo`);
  const [r] = await createSqsPublisher({ client }).publish([
    { id: `${run}-1`, destination: url, body: '{}' },
  ]);
  expect(r).toMatchObject({ ok: false, retryable: false, error: { code: 'MISSING_GROUP_ID' } });
  expect(await q.depth(url)).toBe(0);
});
