import { OnceError, PermanentError } from '@once/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDb, type TestDb } from '../../../../test/support/index.js';
import {
  createSqsConsumer,
  createSqsPublisher,
  readDeadLetter,
  type SqsConsumerOptions,
} from '../../src/index.js';
import { drain, queues, SQS_ENDPOINT, sendAll, sqsClient, unique } from './fixtures/env.js';
import { effectHandler } from './fixtures/once-consumer.js';

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-bad');
let db: TestDb;

beforeAll(async () => {
  db = await freshDb('sqs_bad', 12);
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
    deadLetterQueueUrl: false,
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
    expect(err.code).toBe('SQS_QUEUE_NOT_FOUND');
    expect(err.message).toContain(url);
    expect(err.message).toMatch(/does not exist/);
  });

  it('an endpoint that does not answer', async () => {
    const dead = sqsClient('http://127.0.0.1:9');
    const err = await startFails(options(`http://127.0.0.1:9/000000000000/${run}`, { client: dead }));
    expect(err).toMatchObject({ code: 'SQS_UNREACHABLE', retryable: true });
    dead.destroy();
  });

  it("idFrom 'deduplication-id' on a queue with content-based deduplication, or on a standard queue", async () => {
    const cbd = await q.create(`${run}-cbd.fifo`, { ContentBasedDeduplication: 'true' });
    const err = await startFails(options(cbd, { idFrom: 'deduplication-id' }));
    expect(err.code).toBe('SQS_QUEUE_MISMATCH');
    expect(err.message).toMatch(/content-based deduplication/);
    const std = await q.create(`${run}-std`);
    expect((await startFails(options(std, { idFrom: 'deduplication-id' }))).code).toBe('SQS_QUEUE_MISMATCH');
    // The same option on a FIFO queue without content-based dedup starts.
    const fifo = await q.create(`${run}-ok.fifo`);
    const ok = createSqsConsumer(options(fifo, { idFrom: 'deduplication-id' }));
    await ok.start();
    expect(ok.health()).toMatchObject({ state: 'running', healthy: true });
    await ok.stop();
    expect(ok.state).toBe('stopped');
  });

  it('a default dead-letter queue (`<name>-dead`) or a given one that does not exist', async () => {
    const url = await q.create(`${run}-nodlq`);
    const { deadLetterQueueUrl: _, ...noDeadLetter } = options(url);
    const err = await startFails(noDeadLetter);
    expect(err.code).toBe('SQS_QUEUE_NOT_FOUND');
    expect(err.message).toContain(`${run}-nodlq-dead`);
    expect(err.message).toMatch(/deadLetterQueueUrl/);
    const missing = `${SQS_ENDPOINT}/000000000000/${run}-nodlq-target`;
    const err2 = await startFails(options(url, { deadLetterQueueUrl: missing }));
    expect(err2.code).toBe('SQS_QUEUE_NOT_FOUND');
    expect(err2.message).toMatch(/^deadLetterQueueUrl/);
    // Once the default queue exists, the consumer starts and dead-letters there.
    const dead = await q.create(`${run}-nodlq-dead`);
    const c = createSqsConsumer({
      ...noDeadLetter,
      handler: () => {
        throw new PermanentError('poison');
      },
    });
    await c.start();
    await sendAll(client, url, [{ id: `${run}-poison`, body: '{}' }]);
    let copies: Awaited<ReturnType<typeof drain>> = [];
    const until = Date.now() + 20_000;
    while (copies.length === 0 && Date.now() < until) copies = await drain(client, dead, 500);
    await c.stop();
    expect(copies.map((m) => readDeadLetter(m)?.record.reason)).toEqual(['permanent']);
  });
});

it('a schema that is not installed does not fail start(): the consumer runs unavailable', async () => {
  const url = await q.create(`${run}-noschema`);
  const c = createSqsConsumer(options(url, { schema: `${db.schema}_nope` }));
  await c.start();
  expect(c.health()).toMatchObject({ state: 'running', healthy: false, available: false });
  expect(c.health().lastError?.code).toBe('SCHEMA_NOT_INSTALLED');
  await c.stop();
  expect(c.state).toBe('stopped');
});

it('an unknown option names the nearest known one', () => {
  expect(() =>
    createSqsConsumer({
      ...options(`${SQS_ENDPOINT}/q`),
      visibilityTimeout: 5,
    } as unknown as SqsConsumerOptions),
  ).toThrow("createSqsConsumer: option 'visibilityTimeout' is unknown; did you mean 'visibilityTimeoutS'?");
});

it('invalid options throw at construction, naming the field', () => {
  expect(() => createSqsConsumer(options('not a url'))).toThrow(/^createSqsConsumer: option 'queueUrl'/);
  expect(() => createSqsConsumer(options(`${SQS_ENDPOINT}/q`, { concurrency: 0 }))).toThrow(
    /^createSqsConsumer: option 'concurrency'/,
  );
});

it('a FIFO publish without a group id is refused by name, before SQS sees it', async () => {
  const url = await q.create(`${run}-pub.fifo`);
  const [r] = await createSqsPublisher({ client }).publish([
    { id: `${run}-1`, destination: url, body: '{}' },
  ]);
  expect(r).toMatchObject({ ok: false, retryable: false, error: { code: 'SQS_MISSING_GROUP_ID' } });
  expect(await q.depth(url)).toBe(0);
});
