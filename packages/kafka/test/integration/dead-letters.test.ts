import { OnceError, PermanentError } from '@once/core';
import type { Admin, Kafka, KafkaMessage } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueName } from '../../../../test/support/index.js';
import {
  createKafkaConsumer,
  DeadLetterHeader,
  type KafkaConsumer,
  type KafkaConsumerOptions,
  type ProcessingMode,
} from '../../src/index.js';
import { freshDb, type TestDb } from './fixtures/db.js';
import {
  createTopics,
  header,
  kafkaClient,
  message,
  produce,
  readTopic,
  waitForCommitted,
} from './fixtures/kafka.js';

let db: TestDb;
let kafka: Kafka;
let admin: Admin;
const consumers: KafkaConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_dlq', 8);
  kafka = kafkaClient('once-dlq');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  for (const c of consumers) await c.stop();
  await admin.disconnect();
  await db.close();
});

function consumerOf(
  opts: Partial<KafkaConsumerOptions> & Pick<KafkaConsumerOptions, 'topics' | 'handler'>,
): KafkaConsumer {
  const c = createKafkaConsumer({
    kafka,
    groupId: uniqueName('g'),
    pool: db.pool,
    schema: db.schema,
    fromBeginning: true,
    sessionTimeoutMs: 6_000,
    heartbeatIntervalMs: 500,
    maxAttempts: 3,
    retryDelayMs: () => 50,
    ...opts,
  });
  consumers.push(c);
  return c;
}

const byOffset = (a: KafkaMessage, b: KafkaMessage) =>
  Number(header(a, DeadLetterHeader.SourceOffset)) - Number(header(b, DeadLetterHeader.SourceOffset));

// Batch mode retries by pausing the partition and seeking back; message mode waits in place.
describe.each<[ProcessingMode, number]>([
  ['batch', 0],
  ['message', 1_000],
])('poison and transient failures, %s mode, inlineRetryMaxMs %i', (mode, inlineRetryMaxMs) => {
  it('dead-letters poison with error headers, retries transient failures in order, neighbours unaffected', async () => {
    const topic = uniqueName(`poison-${mode}`);
    await createTopics(admin, { [topic]: 1, [`${topic}.dlq`]: 1 });
    const ledger = await db.ledger(mode);
    const ids = Array.from({ length: 30 }, (_, i) => `${topic}-${i}`);
    await produce(
      kafka,
      topic,
      ids.map((id, i) => message(id, 'k', { i }, { trace: `t${i}` })),
    );
    const failures = new Map<number, number>();
    const consumer = consumerOf({
      topics: [topic],
      processing: mode,
      inlineRetryMaxMs,
      maxBatchSize: 8,
      handler: async (envelope, { tx, id }) => {
        const { i } = JSON.parse(envelope.body.toString()) as { i: number };
        await ledger.record(tx, { messageId: id, key: 'k', payload: String(envelope.attempt) });
        if (i === 10) throw new PermanentError('order 10 is malformed');
        if ((i === 5 || i === 20) && envelope.attempt <= 2) {
          failures.set(i, (failures.get(i) ?? 0) + 1);
          throw new Error(`database of record is busy (${i})`);
        }
        if (i === 25) throw new Error('always transient');
      },
    });
    let paused = 0;
    consumer.on('partition:retry', () => paused++);
    await consumer.start();
    await waitForCommitted(admin, consumer.options.groupId, topic);
    expect(paused).toBe(6);

    const good = ids.filter((_, i) => i !== 10 && i !== 25);
    const verdict = await ledger.check({ expectedIds: good, checkOrderPerKey: true });
    expect(verdict.unexpected).toEqual([]); // the failed handlers' effects rolled back
    expect(verdict.orderViolations).toEqual([]);
    expect(verdict.ok).toBe(true);
    expect(failures).toEqual(
      new Map([
        [5, 2],
        [20, 2],
      ]),
    );

    const dead = (await readTopic(kafka, `${topic}.dlq`, 2)).sort(byOffset);
    expect(dead.map((m) => header(m, 'message-id'))).toEqual([ids[10], ids[25]]);
    const [poison, exhausted] = dead as [KafkaMessage, KafkaMessage];
    expect(header(poison, DeadLetterHeader.Reason)).toBe('permanent');
    expect(header(poison, DeadLetterHeader.ErrorName)).toBe('PermanentError');
    expect(header(poison, DeadLetterHeader.ErrorMessage)).toBe('order 10 is malformed');
    expect(header(poison, DeadLetterHeader.ErrorCode)).toBe('PERMANENT');
    expect(header(poison, DeadLetterHeader.SourceTopic)).toBe(topic);
    expect(header(poison, DeadLetterHeader.SourcePartition)).toBe('0');
    expect(header(poison, DeadLetterHeader.SourceOffset)).toBe('10');
    expect(header(poison, DeadLetterHeader.Consumer)).toBe(consumer.options.consumer);
    expect(header(poison, 'trace')).toBe('t10');
    expect(poison.key?.toString()).toBe('k');
    expect(JSON.parse(poison.value!.toString())).toEqual({ i: 10 });
    expect(header(exhausted, DeadLetterHeader.Reason)).toBe('max-attempts');
    expect(header(exhausted, DeadLetterHeader.Attempts)).toBe('3');
    expect(header(exhausted, DeadLetterHeader.ErrorMessage)).toBe('always transient');
    await consumer.stop();

    // Another group under the same consumer name: processed ids are duplicates, failed ones go again.
    const again = consumerOf({
      topics: [topic],
      processing: mode,
      consumer: consumer.options.consumer,
      handler: () => {},
    });
    let processed = 0;
    again.inbox.on('message:processed', () => processed++);
    await again.start();
    await waitForCommitted(admin, again.options.groupId, topic);
    await again.stop();
    expect(processed).toBe(0);
    const redead = (await readTopic(kafka, `${topic}.dlq`, 4)).slice(2);
    expect(redead.map((m) => header(m, DeadLetterHeader.Reason)).sort()).toEqual([
      'previously-failed',
      'previously-failed',
    ]);
  });
});

describe('bad input', () => {
  it('missing, oversize and non-UTF-8 ids and an empty value are dead-lettered with a named reason', async () => {
    const topic = uniqueName('bad-input');
    await createTopics(admin, { [topic]: 1, [`${topic}.dlq`]: 1 });
    const ledger = await db.ledger('bad');
    await produce(kafka, topic, [
      message(`${topic}-ok-1`, 'k'),
      { key: 'k', value: '{}', headers: {} },
      message('x'.repeat(600), 'k'),
      { key: 'k', value: '{}', headers: { 'message-id': Buffer.from([0xc3, 0x28, 0xff]) } },
      { key: 'k', value: null, headers: { 'message-id': `${topic}-empty` } },
      message(`${topic}-ok-2`, 'k'),
    ]);
    const consumer = consumerOf({
      topics: [topic],
      handler: async (envelope, { tx, id }) => {
        if (envelope.body.length === 0) throw new PermanentError('empty value: expected an order as JSON');
        await ledger.record(tx, { messageId: id, key: 'k', payload: '' });
      },
    });
    await consumer.start();
    await waitForCommitted(admin, consumer.options.groupId, topic);
    expect(
      (await ledger.check({ expectedIds: [`${topic}-ok-1`, `${topic}-ok-2`], checkOrderPerKey: true })).ok,
    ).toBe(true);
    const dead = (await readTopic(kafka, `${topic}.dlq`, 4)).sort(byOffset);
    expect(
      dead.map((m) => [header(m, DeadLetterHeader.Reason), header(m, DeadLetterHeader.ErrorCode)]),
    ).toEqual([
      ['invalid-id', 'INVALID_ID'],
      ['invalid-id', 'INVALID_ID'],
      ['invalid-id', 'INVALID_ID'],
      ['permanent', 'PERMANENT'],
    ]);
    expect(header(dead[0]!, DeadLetterHeader.ErrorMessage)).toMatch(/missing/);
    expect(header(dead[1]!, DeadLetterHeader.ErrorMessage)).toMatch(/600 characters; the maximum is 512/);
    expect(header(dead[2]!, DeadLetterHeader.ErrorMessage)).toMatch(/not valid UTF-8/);
    expect(Buffer.from(dead[2]!.headers!['message-id'] as Buffer)).toEqual(Buffer.from([0xc3, 0x28, 0xff]));
    expect(dead[3]!.value).toBeNull();
  });

  it('rejects bad options with a named field, and a bad start with a typed error', async () => {
    const base = { kafka, groupId: uniqueName('g'), pool: db.pool, schema: db.schema, handler: () => {} };
    const invalid = (patch: object) => {
      try {
        createKafkaConsumer({ ...base, topics: ['t'], ...patch });
      } catch (err) {
        return OnceError.is(err) ? `${err.code}: ${err.message}` : String(err);
      }
      return 'no error';
    };
    expect(invalid({ sessionTimeoutMs: -5 })).toMatch(
      /^INVALID_OPTION: options\.sessionTimeoutMs must be at least/,
    );
    expect(invalid({ maxBatchMs: Number.POSITIVE_INFINITY })).toMatch(
      /^INVALID_OPTION: options\.maxBatchMs must be a finite/,
    );
    expect(invalid({ retentionMs: 'a week' })).toMatch(/^INVALID_OPTION: options\.retentionMs/);
    expect(invalid({ topics: [] })).toMatch(/^INVALID_OPTION: options\.topics/);

    const unknown = createKafkaConsumer({ ...base, topics: [uniqueName('no-such-topic')] });
    await expect(unknown.start()).rejects.toMatchObject({ code: 'UNKNOWN_TOPIC' });
    expect(unknown.health().status).toBe('failed');
    await unknown.stop();

    const topic = uniqueName('exists');
    await createTopics(admin, { [topic]: 1 });
    const noSchema = createKafkaConsumer({ ...base, topics: [topic], schema: 'once_not_installed_here' });
    await expect(noSchema.start()).rejects.toMatchObject({ code: 'SCHEMA_NOT_INSTALLED' });

    const { Kafka: KafkaClass, logLevel } = await import('kafkajs');
    const nowhere = new KafkaClass({
      brokers: ['127.0.0.1:1'],
      logLevel: logLevel.NOTHING,
      retry: { retries: 0 },
    });
    const unreachable = createKafkaConsumer({ ...base, kafka: nowhere, topics: [topic] });
    await expect(unreachable.start()).rejects.toMatchObject({ code: 'KAFKA_UNREACHABLE', retryable: true });
  });
});
