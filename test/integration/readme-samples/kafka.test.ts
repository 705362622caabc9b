import { Kafka, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import {
  createTopicsReady,
  fetchOffsetsReady,
  fetchTopicOffsetsReady,
  serviceUrls,
  uniqueName,
  waitFor,
} from '../../support/index.js';
import { type BrokerSide, runSample } from './harness.js';

// README.md's and packages/kafka/README.md's first samples, run as programs against the real
// broker and fed by a plain kafkajs producer: with the `message-id` header (the sample's idOf line
// deleted, as its comment says) and without any id header (the sample's idOf).
const brokers = [...serviceUrls().kafkaBrokers];

function kafkaSide(groupAsWritten: string, topicAsWritten: string, brokerAsWritten: string) {
  const group = uniqueName('readme-group');
  const topic = uniqueName('readme-topic');
  const kafka = new Kafka({ clientId: 'readme-samples', brokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  const producer = kafka.producer(); // plain: no once publisher, no idempotence
  let ready: Promise<void> | undefined;
  const connect = () => {
    ready ??= (async () => {
      await admin.connect();
      await createTopicsReady(admin, { [topic]: 2 });
      await producer.connect();
    })();
    return ready;
  };
  const committedToEnd = async () => {
    const ends = new Map(
      (await fetchTopicOffsetsReady(admin, topic)).map((p) => [p.partition, BigInt(p.high)]),
    );
    const [t] = await fetchOffsetsReady(admin, { groupId: group, topics: [topic] });
    return (t?.partitions ?? []).every((p) => BigInt(p.offset) >= (ends.get(p.partition) ?? 0n));
  };
  const side: BrokerSide & { group: string } = {
    group,
    replace: [
      [`groupId: '${groupAsWritten}'`, `groupId: '${group}'`],
      [`topics: ['${topicAsWritten}']`, `topics: ['${topic}']`],
      [`brokers: ['${brokerAsWritten}']`, `brokers: ${JSON.stringify(brokers)}`],
    ],
    async send(messages, withIdHeader) {
      await connect();
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
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
      await admin.disconnect().catch(() => {});
    },
  };
  return side;
}

const SAMPLES = [
  { readme: 'README.md', marker: 'readme-kafka', table: 'charges', amount: 'cents' },
  { readme: 'packages/kafka/README.md', marker: 'kafka-readme', table: 'invoices', amount: 'amount' },
] as const;

describe('README samples, Kafka', () => {
  for (const variant of ['idOf', 'header'] as const) {
    for (const { readme, marker, table, amount } of SAMPLES) {
      it(`${readme} ${marker}, ${variant === 'idOf' ? 'no id header: idOf' : 'message-id header'}`, async () => {
        const broker = kafkaSide('billing', 'orders', '127.0.0.1:9092');
        await runSample({
          readme,
          marker,
          table,
          consumer: broker.group,
          bodyOf: (id, n) => JSON.stringify({ id, [amount]: n }),
          variant,
          broker,
        });
      });
    }
  }
});
