import type { Admin, Kafka } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  createTopicsReady,
  freshDb,
  kafkaClient,
  type TestDb,
  uniqueName,
} from '../../../../test/support/index.js';
import { kafkaClientName } from '../../../../test/support/kafka-client.mjs';
import { createKafkaConsumer, type KafkaClient } from '../../src/index.js';
import { clientUnderTest } from './fixtures/client-under-test.js';

// The broker's redelivery horizon against the inbox's memory: a topic that keeps messages longer
// than the inbox keeps ids is read again after an offset reset, so start() warns (DESIGN,
// Retention).

const DAY = 86_400_000;
let db: TestDb;
let kafka: Kafka;
/** The client of the consumers and publishers under test (ONCE_KAFKA_CLIENT). */
let client: KafkaClient;
let admin: Admin;

beforeAll(async () => {
  db = await freshDb('kafka_retention', 4);
  kafka = kafkaClient('once-retention');
  client = await clientUnderTest('once-retention');
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await admin.disconnect();
  await db.close();
});

// Confluent's admin has no describeConfigs: there start() cannot read retention.ms and says so
// at info level instead of warning (or staying silent).
const readsConfigs = kafkaClientName() !== 'confluent';

async function warningsFor(topic: string, extra: { retentionMs: number }, infos: string[] = []) {
  const warnings: string[] = [];
  const consumer = createKafkaConsumer({
    kafka: client,
    groupId: uniqueName('g-retention'),
    topics: [topic],
    pool: db.pool,
    schema: db.schema,
    consumer: 'retention',
    logger: {
      debug() {},
      info: (_f: object, m: string) => void infos.push(m),
      error() {},
      // The test pool has no keepAlive: the pool-settings warning is not this test's subject.
      warn: (_f: object, m: string) => void (m.includes('PostgreSQL pool has no') || warnings.push(m)),
    },
    handler: async () => {},
    ...extra,
  });
  await consumer.start();
  await consumer.stop();
  return warnings;
}

it('start() warns when the topic keeps messages longer than the inbox keeps ids, not otherwise (or says it cannot read them)', {
  timeout: 60_000,
}, async () => {
  const forever = uniqueName('retention-forever');
  const week = uniqueName('retention-week');
  await createTopicsReady(admin, {
    [forever]: { numPartitions: 1, configEntries: [{ name: 'retention.ms', value: '-1' }] },
    [week]: { numPartitions: 1, configEntries: [{ name: 'retention.ms', value: String(7 * DAY) }] },
  });

  if (!readsConfigs) {
    const infos: string[] = [];
    expect(await warningsFor(week, { retentionMs: DAY }, infos)).toEqual([]);
    expect(infos.filter((m) => m.includes('retention check did not run'))).toEqual([
      "once kafka: this client library cannot read topic configurations, so the retention check did not run: keep retentionMs longer than the topics' retention.ms",
    ]);
    return;
  }
  const short = await warningsFor(week, { retentionMs: DAY });
  expect(short).toHaveLength(1);
  expect(short[0]).toContain('consumer "retention" remembers processed ids for 1 days');
  expect(short[0]).toContain(
    `Kafka topic ${week} (retention.ms; read again after an offset reset) can deliver a message again for 7 days`,
  );
  expect(short[0]).toMatch(/at least the broker's horizon$/);

  expect(await warningsFor(week, { retentionMs: 7 * DAY })).toEqual([]);
  expect((await warningsFor(forever, { retentionMs: 30 * DAY }))[0]).toContain('again with no time limit');
});
