import { createOutbox, createRelay, OnceError } from '@once/core';
import { MAX_ID_LENGTH } from '@once/core/admin';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FaultProxy, freshDb, type TestDb } from '../../../../test/support/index.js';
import { envelopeOf } from '../../src/envelope-of.js';
import { BODY_ENCODING_ATTRIBUTE, createSqsPublisher } from '../../src/index.js';
import { drain, queues, SQS_ENDPOINT, sqsClient, unique } from './fixtures/env.js';

// The SQS publisher against ElasticMQ: bodies that are not SQS text arrive as the same bytes,
// a maximum-size id is carried whole, and the relay's deadline aborts the request in flight.

const client = sqsClient();
const q = queues(client);
const run = unique('sqs-pub');
let db: TestDb;
let proxy: FaultProxy;

beforeAll(async () => {
  db = await freshDb('sqs_pub', 12);
  const u = new URL(SQS_ENDPOINT);
  proxy = await FaultProxy.start({ host: u.hostname, port: Number(u.port) });
});
afterAll(async () => {
  await proxy.close();
  await q.drop();
  await db.close();
  client.destroy();
});

const settings = (queueUrl: string) => ({
  queueUrl,
  idFrom: 'header' as const,
  idHeader: 'message-id',
});

it('bodies SQS cannot carry as text (invalid UTF-8, NUL) go as declared base64 and decode to the same bytes; text goes as it is', async () => {
  const url = await q.create(`${run}-bin`);
  const outbox = createOutbox({ pool: db.pool, schema: db.schema, destinations: ['bin'] });
  const bodies = {
    binary: Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x41]),
    nul: Buffer.from('a\u0000b', 'utf8'),
    text: Buffer.from('{"caf\u00e9":"\u{1f600}"}', 'utf8'),
  };
  const ids = new Map<string, string>();
  for (const [name, body] of Object.entries(bodies))
    ids.set(await outbox.enqueue(db.pool, 'bin', body), name);
  const relay = createRelay({
    pool: db.pool,
    schema: db.schema,
    publishers: { bin: createSqsPublisher({ client, queueUrl: url }) },
    listen: false,
  });
  expect(await relay.runOnce()).toBe(3);
  const got = await drain(client, url);
  expect(got).toHaveLength(3);
  for (const m of got) {
    const envelope = envelopeOf(m, settings(url));
    const name = ids.get(envelope.id ?? '')!;
    expect(envelope.body).toEqual(bodies[name as keyof typeof bodies]);
    expect(envelope.headers[BODY_ENCODING_ATTRIBUTE]).toBeUndefined();
    // Declared on the wire only where the bytes are not SQS text.
    expect(m.MessageAttributes?.[BODY_ENCODING_ATTRIBUTE]?.StringValue).toBe(
      name === 'text' ? undefined : 'base64',
    );
    if (name === 'text') expect(m.Body).toBe(bodies.text.toString('utf8'));
  }
});

it(`a ${MAX_ID_LENGTH}-character id is carried whole, on standard and FIFO queues`, async () => {
  const std = await q.create(`${run}-id`);
  const fifo = await q.create(`${run}-id.fifo`);
  const id = `${run}-${'x'.repeat(MAX_ID_LENGTH)}`.slice(0, MAX_ID_LENGTH);
  const publisher = createSqsPublisher({ client });
  const results = await publisher.publish([
    { id, destination: std, body: 'std' },
    { id, destination: fifo, key: 'k', body: 'fifo' },
  ]);
  expect(results.map((r) => r.ok)).toEqual([true, true]);
  for (const url of [std, fifo]) {
    const [m, ...rest] = await drain(client, url);
    expect(rest).toHaveLength(0);
    expect(envelopeOf(m!, settings(url)).id).toBe(id);
  }
});

it("the relay's deadline aborts the request in flight: reported as a retryable failure, not as sent", async () => {
  const url = await q.create(`${run}-slow`);
  const slow = sqsClient(proxy.url(SQS_ENDPOINT));
  try {
    const publisher = createSqsPublisher({ client: slow, queueUrl: url, maxRetries: 5 });
    proxy.latencyMs(3_000);
    const controller = new AbortController();
    const reason = new OnceError('PUBLISH_TIMEOUT', 'deadline', { retryable: true });
    setTimeout(() => controller.abort(reason), 200);
    const results = await publisher.publish([{ id: `${run}-s1`, destination: 'slow', body: 'x' }], {
      signal: controller.signal,
    });
    expect(results).toEqual([
      {
        id: `${run}-s1`,
        ok: false,
        retryable: true,
        error: expect.objectContaining({ code: 'PUBLISH_TIMEOUT' }),
      },
    ]);
  } finally {
    proxy.latencyMs(0);
    slow.destroy();
  }
});
