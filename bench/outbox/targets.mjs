// The outbox benches' brokers: each gives the publisher the relay uses, its destination, and how
// to empty (reset) and remove (close) it; `destinationFor(keys)`, where given, is the destination
// for rows with that many keys (0: none). `null` confirms at once: the relay's own cost alone.
import { CreateQueueCommand, DeleteQueueCommand, PurgeQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createKafkaPublisher } from '@once/kafka';
import { createNatsPublisher } from '@once/nats';
import { createRabbitPublisher } from '@once/rabbitmq';
import { createSqsPublisher } from '@once/sqs';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';

const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const KAFKA_BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const SQS_ENDPOINT = process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324';
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

async function kafkaTarget(run) {
  const kafka = new Kafka({ clientId: run, brokers: KAFKA_BROKERS, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const topic = `${run}-topic`;
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 3 }] });
  const publisher = createKafkaPublisher({ kafka });
  await publisher.start();
  return {
    name: 'kafka',
    destination: topic,
    publisher,
    async reset() {},
    async close() {
      await publisher.stop();
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
      await admin.disconnect();
    },
  };
}

async function rabbitTarget(run) {
  const conn = await amqp.connect(AMQP_URL);
  conn.on('error', () => {});
  const ch = await conn.createChannel();
  const exchange = `${run}-x`;
  const queue = `${run}-q`;
  await ch.assertExchange(exchange, 'fanout', { durable: true });
  await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await ch.bindQueue(queue, exchange, '');
  const publisher = createRabbitPublisher({ url: AMQP_URL });
  await publisher.start();
  return {
    name: 'rabbitmq',
    destination: exchange,
    publisher,
    async reset() {
      await ch.purgeQueue(queue);
    },
    async close() {
      await publisher.stop();
      await ch.deleteQueue(queue).catch(() => {});
      await ch.deleteExchange(exchange).catch(() => {});
      await conn.close().catch(() => {});
    },
  };
}

async function sqsTarget(run) {
  const client = new SQSClient({
    endpoint: SQS_ENDPOINT,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const res = await client.send(
    new CreateQueueCommand({ QueueName: `${run}.fifo`, Attributes: { FifoQueue: 'true' } }),
  );
  const url = res.QueueUrl;
  // Rows without a key go to a standard queue: a FIFO queue needs a MessageGroupId.
  const std = (await client.send(new CreateQueueCommand({ QueueName: `${run}-std` }))).QueueUrl;
  const publisher = createSqsPublisher({ client });
  return {
    name: 'sqs',
    destination: url,
    destinationFor: (keys) => (keys === 0 ? std : url),
    publisher,
    async reset() {
      await client.send(new PurgeQueueCommand({ QueueUrl: url })).catch(() => {});
      await client.send(new PurgeQueueCommand({ QueueUrl: std })).catch(() => {});
    },
    async close() {
      await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
      await client.send(new DeleteQueueCommand({ QueueUrl: std })).catch(() => {});
      client.destroy();
    },
  };
}

async function natsTarget(run) {
  const nc = await connect({ servers: NATS_URL, name: run });
  const jsm = await jetstreamManager(nc);
  const stream = run.replace(/[^A-Za-z0-9_-]/g, '_');
  const subject = `${stream}.out`;
  await jsm.streams.add({ name: stream, subjects: [subject] });
  const publisher = createNatsPublisher({ connection: nc });
  await publisher.start();
  return {
    name: 'nats',
    destination: subject,
    publisher,
    async reset() {
      await jsm.streams.purge(stream).catch(() => {});
    },
    async close() {
      await publisher.stop();
      await jsm.streams.delete(stream).catch(() => {});
      await nc.close().catch(() => {});
    },
  };
}

function nullTarget() {
  return {
    name: 'null',
    destination: 'null',
    publisher: { async publish() {} },
    async reset() {},
    async close() {},
  };
}

const makers = {
  kafka: kafkaTarget,
  rabbitmq: rabbitTarget,
  sqs: sqsTarget,
  nats: natsTarget,
  null: nullTarget,
};

/** The named broker's target; `run` names its topic, queue or stream. */
export async function makeTarget(name, run) {
  const make = makers[name];
  if (!make) throw new Error(`unknown broker ${name} (one of ${Object.keys(makers).join(', ')})`);
  return make(run);
}
