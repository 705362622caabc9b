// One demo consumer: consumes a broker's queue effectively once into a ledger table and reports
// its outcome counts on stdout as JSON lines. argv: broker schema source consumerName
import { SQSClient } from '@aws-sdk/client-sqs';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { createKafkaConsumer } from '../../packages/kafka/dist/index.js';
import { createRabbitConsumer } from '../../packages/rabbitmq/dist/index.js';
import { createSqsConsumer } from '../../packages/sqs/dist/index.js';

const [broker, schema, source, consumerName] = process.argv.slice(2);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 8 });
pool.on('error', () => {});
const counts = { processed: 0, duplicate: 0, conflict: 0, failed: 0, retry: 0 };

const common = {
  pool,
  schema,
  consumer: consumerName,
  handler: async (envelope, { tx }) => {
    await tx.query(`INSERT INTO ${schema}.demo_effects (broker, id) VALUES ($1, $2)`, [broker, envelope.id]);
  },
};

let consumer;
if (broker === 'kafka') {
  const kafka = new Kafka({ brokers: process.env.KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING });
  consumer = createKafkaConsumer({
    ...common,
    kafka,
    groupId: `${consumerName}-group`,
    topics: [source],
    fromBeginning: true,
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 1000,
  });
} else if (broker === 'rabbitmq') {
  consumer = createRabbitConsumer({
    ...common,
    url: process.env.AMQP_URL,
    queue: source,
    prefetch: 50,
    batch: true,
  });
} else {
  const client = new SQSClient({
    endpoint: process.env.SQS_ENDPOINT,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  consumer = createSqsConsumer({
    ...common,
    client,
    queueUrl: source,
    deadLetter: { queueUrl: process.env.DEMO_SQS_DLQ },
    waitTimeSeconds: 1,
    batch: true,
  });
}
for (const status of Object.keys(counts)) consumer.inbox.on(`message:${status}`, () => counts[status]++);
await consumer.start();
const report = () => process.stdout.write(`${JSON.stringify(counts)}\n`);
setInterval(report, 10).unref();
report();
process.once('SIGTERM', async () => {
  await consumer.stop();
  report();
  await pool.end();
  process.exit(0);
});
