import { OnceError, PermanentError } from '@once/core';
import { DEAD_LETTER_RECORD, type DeadLetterRecord, decodeDeadLetterRecord } from '@once/core/adapter';
import type { Admin, Kafka, KafkaMessage } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTopicsReady,
  freshDb,
  header,
  kafkaClient,
  message,
  produce,
  readTopic,
  type TestDb,
  uniqueName,
  waitForCommitted,
} from '../../../../test/support/index.js';
import {
  createKafkaConsumer,
  type KafkaClient,
  type KafkaConsumer,
  type KafkaConsumerOptions,
} from '../../src/index.js';
import { clientUnderTest } from './fixtures/client-under-test.js';

let db: TestDb;
let kafka: Kafka;
/** The client of the consumers and publishers under test (ONCE_KAFKA_CLIENT). */
let client: KafkaClient;
let admin: Admin;
const consumers: KafkaConsumer[] = [];

beforeAll(async () => {
  db = await freshDb('kafka_dlq', 8);
  kafka = kafkaClient('once-dlq');
  client = await clientUnderTest('once-dlq');
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
    kafka: client,
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

/** The `once-dead-letter` record of a dead-letter copy (the test fails if it has none). */
function recordOf(m: KafkaMessage): DeadLetterRecord {
  const record = decodeDeadLetterRecord(header(m, DEAD_LETTER_RECORD));
  if (!record) throw new Error(`no ${DEAD_LETTER_RECORD} header on a dead-letter copy`);
  return record;
}

const byOffset = (a: KafkaMessage, b: KafkaMessage) =>
  Number(recordOf(a).origin.offset) - Number(recordOf(b).origin.offset);

// Batch mode retries by pausing the partition and seeking back; message mode waits in place.
describe.each<['batch' | 'message', number]>([
  ['batch', 0],
  ['message', 1_000],
])('poison and transient failures, %s mode, inlineRetryMaxMs %i', (mode, inlineRetryMaxMs) => {
  it('dead-letters poison with error headers, retries transient failures in order, neighbours unaffected', async () => {
    const topic = uniqueName(`poison-${mode}`);
    await createTopicsReady(admin, { [topic]: 1, [`${topic}.dlq`]: 1 });
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
      batch: mode === 'batch',
      inlineRetryMaxMs,
      batchSize: 8,
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
    expect(recordOf(poison)).toEqual({
      reason: 'permanent',
      error: { name: 'PermanentError', message: 'order 10 is malformed', code: 'PERMANENT' },
      attempts: 1,
      consumer: consumer.options.consumer,
      id: ids[10],
      origin: { broker: 'kafka', queue: topic, partition: 0, offset: '10', group: consumer.options.groupId },
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    // The original key, value and headers, byte for byte, and one header of ours: no per-field ones.
    expect(Object.keys(poison.headers ?? {}).sort()).toEqual(['message-id', DEAD_LETTER_RECORD, 'trace']);
    expect(header(poison, 'trace')).toBe('t10');
    expect(poison.key?.toString()).toBe('k');
    expect(JSON.parse(poison.value!.toString())).toEqual({ i: 10 });
    expect(recordOf(exhausted)).toMatchObject({
      reason: 'max-attempts',
      attempts: 3,
      error: { message: 'always transient' },
    });
    await consumer.stop();

    // Another group under the same consumer name: processed ids are duplicates, failed ones go again.
    const again = consumerOf({
      topics: [topic],
      batch: mode === 'batch',
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
    expect(redead.map((m) => recordOf(m).reason).sort()).toEqual(['previously-failed', 'previously-failed']);
  });
});

describe('dead-lettering off', () => {
  it('says what is recorded: a failed inbox row for a permanent failure, nothing for an invalid id', async () => {
    const topic = uniqueName('dlq-off');
    await createTopicsReady(admin, { [topic]: 1 });
    await produce(kafka, topic, [
      message(`${topic}-ok`, 'k'),
      message(`${topic}-bad`, 'k'),
      { key: 'k', value: '{}', headers: { trace: 't' } },
    ]);
    const errors: { message: string; fields: Record<string, unknown> | undefined }[] = [];
    const quiet = () => {};
    const consumer = consumerOf({
      topics: [topic],
      deadLetterTopic: false,
      logger: {
        debug: quiet,
        info: quiet,
        warn: quiet,
        error: (fields, message) => errors.push({ message, fields }),
      },
      handler: (envelope) => {
        if (envelope.id === `${topic}-bad`) throw new PermanentError('order is malformed');
      },
    });
    const skipped: { id: string | undefined; reason: string; recorded: boolean }[] = [];
    consumer.on('message:dead-lettered', (e) =>
      skipped.push({ id: e.id, reason: e.reason, recorded: e.recorded }),
    );
    await consumer.start();
    await waitForCommitted(admin, consumer.options.groupId, topic);
    await consumer.stop();

    expect(skipped).toEqual([
      { id: `${topic}-bad`, reason: 'permanent', recorded: true },
      { id: undefined, reason: 'invalid-id', recorded: false },
    ]);
    // The permanent failure is in the inbox, with its body, as the log line says.
    const rows = await db.pool.query<{ message_id: string; status: string; body: Buffer }>(
      `SELECT message_id, status, body FROM ${db.schema}.inbox WHERE consumer = $1 AND status = 'failed'`,
      [consumer.options.consumer],
    );
    expect(rows.rows.map((r) => [r.message_id, r.status])).toEqual([[`${topic}-bad`, 'failed']]);
    const skips = errors.filter((e) => /dead-lettering is off/.test(e.message));
    expect(skips).toHaveLength(2);
    expect(skips[0]!.message).toMatch(/failed inbox row/);
    expect(skips[0]!.message).not.toMatch(/NOT recorded/);
    expect(skips[0]!.fields).toMatchObject({ topic, partition: 0, offset: '1', id: `${topic}-bad` });
    // The invalid id has no row: the log line must not claim one, and carries what there is.
    expect(skips[1]!.message).toMatch(/NOT recorded anywhere/);
    expect(skips[1]!.fields).toMatchObject({ topic, partition: 0, offset: '2', headers: ['trace'] });
  });
});

describe('bad input', () => {
  it('missing, oversize and non-UTF-8 ids and an empty value are dead-lettered with a named reason', async () => {
    const topic = uniqueName('bad-input');
    await createTopicsReady(admin, { [topic]: 1, [`${topic}.dlq`]: 1 });
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
    expect(dead.map((m) => [recordOf(m).reason, recordOf(m).error.code])).toEqual([
      ['invalid-id', 'INVALID_ID'],
      ['invalid-id', 'INVALID_ID'],
      ['invalid-id', 'INVALID_ID'],
      ['permanent', 'PERMANENT'],
    ]);
    expect(recordOf(dead[0]!).error.message).toMatch(/missing/);
    expect(recordOf(dead[1]!).error.message).toMatch(/600 characters; the maximum is 512/);
    expect(recordOf(dead[2]!).error.message).toMatch(/not valid UTF-8/);
    expect(recordOf(dead[0]!).id).toBeUndefined();
    expect(Buffer.from(dead[2]!.headers!['message-id'] as Buffer)).toEqual(Buffer.from([0xc3, 0x28, 0xff]));
    expect(dead[3]!.value).toBeNull();
  });

  it('rejects bad options with a named field, and a bad start with a typed error', async () => {
    const base = {
      kafka: client,
      groupId: uniqueName('g'),
      pool: db.pool,
      schema: db.schema,
      handler: () => {},
    };
    const invalid = (patch: object) => {
      try {
        createKafkaConsumer({ ...base, topics: ['t'], ...patch });
      } catch (err) {
        return OnceError.is(err) ? `${err.code}: ${err.message}` : String(err);
      }
      return 'no error';
    };
    expect(invalid({ sessionTimeoutMs: -5 })).toMatch(
      /^INVALID_OPTION: createKafkaConsumer: option 'sessionTimeoutMs' must be at least/,
    );
    expect(invalid({ maxBatchMs: Number.POSITIVE_INFINITY })).toMatch(
      /^INVALID_OPTION: createKafkaConsumer: option 'maxBatchMs' must be a whole number of milliseconds/,
    );
    expect(invalid({ retentionMs: 'a week' })).toMatch(
      /^INVALID_OPTION: createKafkaConsumer: option 'retentionMs'/,
    );
    expect(invalid({ topics: [] })).toMatch(/^INVALID_OPTION: createKafkaConsumer: option 'topics'/);

    const unknown = createKafkaConsumer({ ...base, topics: [uniqueName('no-such-topic')] });
    await expect(unknown.start()).rejects.toMatchObject({ code: 'KAFKA_UNKNOWN_TOPIC' });
    expect(unknown.health().state).toBe('failed');
    await unknown.stop();

    const topic = uniqueName('exists');
    await createTopicsReady(admin, { [topic]: 1 });
    // A missing schema does not fail start(): the consumer waits for migrate(), unhealthy.
    const noSchema = createKafkaConsumer({ ...base, topics: [topic], schema: 'once_not_installed_here' });
    await noSchema.start();
    expect(noSchema.health()).toMatchObject({ healthy: false, available: false });
    expect(noSchema.health().lastError?.code).toBe('SCHEMA_NOT_INSTALLED');
    await noSchema.stop();
    expect(invalid({ maxBatchSize: 10 })).toBe(
      // An option of an earlier 0.x: the refusal names what replaced it (issue #29 item 8).
      "INVALID_OPTION: createKafkaConsumer: option 'maxBatchSize' became 'batchSize' (see CHANGELOG.md)",
    );
    expect(invalid({ handler: undefined })).toBe(
      "INVALID_OPTION: createKafkaConsumer: option 'handler' is required",
    );

    // The client under test pointed at a port where no broker listens.
    const nowhere = await clientUnderTest(uniqueName('once-nowhere'), ['127.0.0.1:1']);
    const unreachable = createKafkaConsumer({ ...base, kafka: nowhere, topics: [topic] });
    await expect(unreachable.start()).rejects.toMatchObject({ code: 'KAFKA_UNREACHABLE', retryable: true });
  });
});
