// The campaign's view of each broker: destinations for once and for the naive control, a
// producer, and the end-of-run questions (settled? dead letters?). Everything here talks to
// the shared brokers directly; only the consumer children go through the fault proxy.
import { randomUUID } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect, headers as natsHeaders } from '@nats-io/transport-node';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';

export const BROKER_URLS = Object.freeze({
  kafka: process.env.KAFKA_BROKERS ?? '127.0.0.1:9092',
  sqs: process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324',
  rabbitmq: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
});

/** Where the fault proxy forwards to, per broker (NATS: the run's own server, `url`). */
export function proxyTarget(broker, url) {
  if (broker === 'kafka') return BROKER_URLS.kafka.split(',')[0];
  const u = new URL(url ?? BROKER_URLS[broker]);
  return `${u.hostname}:${u.port}`;
}

export const KAFKA_PARTITIONS = 4;

/** The client libraries a once Kafka consumer of the campaign can run on (`--kafka-client`). */
export const KAFKA_CLIENTS = Object.freeze(['kafkajs', 'platformatic', 'confluent']);

/** Kafka: one topic (4 partitions) read by two groups, once's and the naive one; `<topic>.dlq`. */
async function kafkaSide(name) {
  const kafka = new Kafka({ clientId: name, brokers: [BROKER_URLS.kafka], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const topic = name;
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic, numPartitions: KAFKA_PARTITIONS },
      { topic: `${topic}.dlq`, numPartitions: 1 },
    ],
  });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const committedToEnd = async (groupId) => {
    const ends = new Map((await admin.fetchTopicOffsets(topic)).map((p) => [p.partition, BigInt(p.high)]));
    const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
    const behind = (t?.partitions ?? []).map((p) => {
      const end = ends.get(p.partition) ?? 0n;
      return end === 0n ? 0n : end - (BigInt(p.offset) < 0n ? 0n : BigInt(p.offset));
    });
    return behind.reduce((a, b) => a + b, 0n);
  };
  return {
    childSettings: (mode) => ({ topic, groupId: `${topic}-${mode}` }),
    async publish(messages) {
      await producer.send({
        topic,
        acks: -1,
        messages: messages.map((m) => ({ key: m.key, value: m.body, headers: { 'message-id': m.id } })),
      });
    },
    /** Messages not yet settled by once's group (published minus committed). */
    async unsettled() {
      return Number(await committedToEnd(`${topic}-once`));
    },
    async deadLetters() {
      const [p] = await admin.fetchTopicOffsets(`${topic}.dlq`);
      return Number(p?.high ?? 0) - Number(p?.low ?? 0);
    },
    async close() {
      await producer.disconnect().catch(() => {});
      await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => {});
      await admin.disconnect().catch(() => {});
    },
  };
}

/** SQS (ElasticMQ): a FIFO queue for once (+ its dead-letter queue) and a copy for the naive control. */
async function sqsSide(name) {
  const client = new SQSClient({
    endpoint: BROKER_URLS.sqs,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const create = async (q) =>
    (
      await client.send(
        new CreateQueueCommand({ QueueName: q, Attributes: { FifoQueue: 'true', VisibilityTimeout: '10' } }),
      )
    ).QueueUrl;
  const onceUrl = await create(`${name}.fifo`);
  const dlqUrl = await create(`${name}-dlq.fifo`);
  const naiveUrl = await create(`${name}-naive.fifo`);
  const count = async (url) => {
    const a =
      (await client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] })))
        .Attributes ?? {};
    return (
      Number(a.ApproximateNumberOfMessages ?? 0) +
      Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
      Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
    );
  };
  return {
    childSettings: (mode) => (mode === 'once' ? { queueUrl: onceUrl, dlqUrl } : { queueUrl: naiveUrl }),
    async publish(messages) {
      // Every send its own deduplication id: a re-send the emulator swallowed would prove nothing.
      for (const url of [onceUrl, naiveUrl]) {
        for (let i = 0; i < messages.length; i += 10) {
          const res = await client.send(
            new SendMessageBatchCommand({
              QueueUrl: url,
              Entries: messages.slice(i, i + 10).map((m, k) => ({
                Id: String(k),
                MessageBody: m.body,
                MessageGroupId: m.key,
                MessageDeduplicationId: randomUUID(),
                MessageAttributes: { 'message-id': { DataType: 'String', StringValue: m.id } },
              })),
            }),
          );
          if (res.Failed?.length) throw new Error(`SendMessageBatch failed: ${JSON.stringify(res.Failed)}`);
        }
      }
    },
    unsettled: () => count(onceUrl),
    deadLetters: () => count(dlqUrl),
    async close() {
      for (const url of [onceUrl, dlqUrl, naiveUrl]) {
        await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
      }
      client.destroy();
    },
  };
}

/** RabbitMQ: a topic exchange feeding once's quorum queue and the naive control's quorum queue. */
async function rabbitSide(name) {
  const conn = await amqp.connect(BROKER_URLS.rabbitmq);
  conn.on('error', () => {});
  const ch = await conn.createConfirmChannel();
  ch.on('error', () => {});
  const exchange = `${name}.in`;
  const naive = `${name}-naive`;
  await ch.assertExchange(exchange, 'topic', { durable: true });
  for (const q of [name, naive]) {
    await ch.assertQueue(q, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await ch.bindQueue(q, exchange, '#');
  }
  /** Ready messages; a missing queue (not declared yet) counts as empty. */
  const ready = async (q) => {
    const c = await conn.createChannel();
    c.on('error', () => {});
    try {
      return (await c.checkQueue(q)).messageCount;
    } catch {
      return 0;
    } finally {
      await c.close().catch(() => {});
    }
  };
  const aside = [`${name}.quarantine`, ...[1000, 10000, 60000].map((t) => `${name}.retry.${t}ms`)];
  return {
    childSettings: (mode) => ({ queue: mode === 'once' ? name : naive }),
    async publish(messages) {
      for (const m of messages) {
        const ok = ch.publish(exchange, m.key, Buffer.from(m.body), { messageId: m.id, persistent: true });
        if (!ok) await new Promise((r) => ch.once('drain', r));
      }
      await ch.waitForConfirms();
    },
    /** Ready in once's queue and the queues beside it; unacked ones are the children's in-flight. */
    async unsettled() {
      let n = 0;
      for (const q of [name, ...aside]) n += await ready(q);
      return n;
    },
    deadLetters: () => ready(`${name}.dead`),
    async close() {
      for (const q of [name, naive, `${name}.dead`, ...aside]) await ch.deleteQueue(q).catch(() => {});
      for (const x of [exchange, `${name}.dlx`]) await ch.deleteExchange(x).catch(() => {});
      await conn.close().catch(() => {});
    },
  };
}

/**
 * NATS JetStream, on the run's own server (`url`): one stream capturing `<name>.in.>` read by two
 * durables, once's (made by the adapter) and the naive control's; dead letters to `<name>.dead`
 * in a stream of their own. The id travels in the `message-id` header, not `Nats-Msg-Id`: the
 * campaign re-sends ids on purpose, and JetStream would drop a re-send inside its window.
 */
async function natsSide(name, url) {
  const stream = name.replace(/[^A-Za-z0-9_-]/g, '_');
  const nc = await natsConnect({ servers: url, maxReconnectAttempts: -1, name: `${name}-side` });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc, { timeout: 5_000 });
  await jsm.streams.add({ name: stream, subjects: [`${stream}.in.>`] });
  await jsm.streams.add({ name: `${stream}_dead`, subjects: [`${stream}.dead`] });
  await jsm.consumers.add(stream, {
    durable_name: 'chaos_naive',
    ack_policy: AckPolicy.Explicit,
    ack_wait: 6_000 * 1e6,
    filter_subject: `${stream}.in.>`,
  });
  return {
    childSettings: (mode) =>
      mode === 'once'
        ? { subject: `${stream}.in.>`, stream, durable: 'chaos_once', deadLetterSubject: `${stream}.dead` }
        : { stream, durable: 'chaos_naive' },
    async publish(messages) {
      for (const m of messages) {
        const h = natsHeaders();
        h.set('message-id', m.id);
        await js.publish(`${stream}.in.${m.key}`, m.body, { headers: h });
      }
    },
    /** Not yet delivered to once's durable, or delivered and not acked. */
    async unsettled() {
      const i = await jsm.consumers.info(stream, 'chaos_once');
      return i.num_pending + i.num_ack_pending;
    },
    deadLetters: async () => (await jsm.streams.info(`${stream}_dead`)).state.messages,
    async close() {
      for (const s of [stream, `${stream}_dead`]) await jsm.streams.delete(s).catch(() => {});
      await nc.close().catch(() => {});
    },
  };
}

/** The broker side of one campaign run; `url` is the run's own server where it has one (NATS). */
export function brokerSide(broker, name, url) {
  if (broker === 'kafka') return kafkaSide(name);
  if (broker === 'sqs') return sqsSide(name);
  if (broker === 'rabbitmq') return rabbitSide(name);
  if (broker === 'nats') return natsSide(name, url);
  throw new Error(`unknown broker '${broker}': use kafka, sqs, rabbitmq or nats`);
}
