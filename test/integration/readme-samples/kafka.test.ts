import { Kafka, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import {
  createTopicsReady,
  fetchOffsetsReady,
  fetchTopicOffsetsReady,
  serviceUrls,
  waitFor,
} from '../../support/index.js';
import { type BrokerSide, runSample } from './harness.js';

// README.md's and packages/kafka/README.md's first samples, run as programs exactly as written
// against the real broker and fed by a plain kafkajs producer: with the `message-id` header (the
// sample's idOf line deleted, as its comment says) and without any id header (the sample's idOf).
// The samples name their topic and group, so each run deletes them first and makes the topic
// as the sample's comment says.
const brokers = [...serviceUrls().kafkaBrokers];

function kafkaSide(group: string, topic: string, partitions: number) {
  const kafka = new Kafka({ clientId: 'readme-samples', brokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  const producer = kafka.producer(); // plain: no once publisher, no idempotence
  const gone = async () => {
    const ours = (await admin.listTopics()).filter((t) => t === topic || t.startsWith(`${topic}.`));
    if (ours.length) await admin.deleteTopics({ topics: ours });
    await waitFor(`${ours.join(', ')} deleted`, async () =>
      (await admin.listTopics()).every((t) => !ours.includes(t)),
    );
  };
  const committedToEnd = async () => {
    const ends = new Map(
      (await fetchTopicOffsetsReady(admin, topic)).map((p) => [p.partition, BigInt(p.high)]),
    );
    const [t] = await fetchOffsetsReady(admin, { groupId: group, topics: [topic] });
    return (t?.partitions ?? []).every((p) => BigInt(p.offset) >= (ends.get(p.partition) ?? 0n));
  };
  const side: BrokerSide = {
    replace: [],
    env: { KAFKA_BROKERS: brokers.join(',') },
    async prepare() {
      await admin.connect();
      await admin.deleteGroups([group]).catch(() => {});
      await gone();
      await createTopicsReady(admin, { [topic]: partitions });
      await producer.connect();
    },
    async send(messages, withIdHeader) {
      await producer.send({
        topic,
        messages: messages.map((m) => ({
          key: m.id,
          value: m.body,
          ...(withIdHeader ? { headers: { 'message-id': m.id } } : {}),
        })),
      });
    },
    drained: () => waitFor(`group ${group} to commit to the end of ${topic}`, committedToEnd),
    async checkAfterExit() {
      expect(await committedToEnd(), 'offsets committed to the end').toBe(true);
      const dlq = (await admin.listTopics()).filter((t) => t.startsWith(`${topic}.`));
      expect(dlq, 'no dead-letter topic written').toEqual([]);
    },
    async cleanup() {
      await producer.disconnect().catch(() => {});
      await admin.deleteGroups([group]).catch(() => {});
      await gone().catch(() => {});
      await admin.disconnect().catch(() => {});
    },
  };
  return side;
}

// As written in each sample: table, group, topic (with the partitions its comment creates).
const SAMPLES = [
  {
    readme: 'README.md',
    marker: 'readme-kafka',
    table: 'charges',
    amount: 'cents',
    group: 'billing',
    partitions: 3,
  },
  {
    readme: 'packages/kafka/README.md',
    marker: 'kafka-readme',
    table: 'invoices',
    amount: 'amount',
    group: 'invoicing',
    partitions: 1,
  },
] as const;

describe('README samples, Kafka', () => {
  for (const variant of ['idOf', 'header'] as const) {
    for (const { readme, marker, table, amount, group, partitions } of SAMPLES) {
      it(`${readme} ${marker}, ${variant === 'idOf' ? 'no id header: idOf' : 'message-id header'}`, async () => {
        await runSample({
          readme,
          marker,
          table,
          consumer: group,
          bodyOf: (id, n) => JSON.stringify({ id, [amount]: n }),
          variant,
          broker: kafkaSide(group, 'orders', partitions),
        });
      });
    }
  }
});
