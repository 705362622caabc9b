// The soak's consumer process (started by bench/soak/soak.mjs with --expose-gc, one per broker):
// one once consumer in batch mode, an effect row per message, until SOAK_N messages are processed
// (or SOAK_MAX_S seconds have passed).
// Every SOAK_SAMPLE_S seconds (default 5) it sends the parent a sample: messages processed, RSS,
// heap used as found, and heap used right after a full GC. Args: broker, name (queue, topic or
// stream), schema. Nothing else runs in this process, so its RSS is the consumer's.
import { migrate } from '@once/core';
import pg from 'pg';

const [broker, name, schema] = process.argv.slice(2);
const N = Number(process.env.SOAK_N);
const SAMPLE_MS = Number(process.env.SOAK_SAMPLE_S ?? 5) * 1000;
/** A time cap: the run ends at N messages or after this many seconds, whichever comes first. */
const MAX_MS = Number(process.env.SOAK_MAX_S ?? Number.POSITIVE_INFINITY) * 1000;
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

const pool = new pg.Pool({ connectionString: DB_URL, max: 5 });
pool.on('error', () => {});
await migrate(pool, { schema });
await pool.query(`CREATE TABLE IF NOT EXISTS ${schema}.effects (id text NOT NULL, amount int NOT NULL)`);
const EFFECT = `INSERT INTO ${schema}.effects (id, amount) VALUES ($1, $2)`;
const handler = async (e, { tx }) => {
  await tx.query(EFFECT, [e.id, JSON.parse(e.body.toString()).amount]);
};

async function make() {
  if (broker === 'kafka') {
    const { Kafka, logLevel } = await import('kafkajs');
    const { createKafkaConsumer } = await import('@once/kafka');
    const kafka = new Kafka({ clientId: name, brokers: ['127.0.0.1:9092'], logLevel: logLevel.NOTHING });
    return createKafkaConsumer({
      kafka,
      groupId: name,
      topics: [name],
      pool,
      schema,
      batch: true,
      batchSize: 500,
      concurrency: 3,
      fromBeginning: true,
      deadLetterTopic: false,
      logger: false,
      handler,
    });
  }
  if (broker === 'rabbitmq') {
    const { createRabbitConsumer } = await import('@once/rabbitmq');
    return createRabbitConsumer({
      url: 'amqp://guest:guest@127.0.0.1:5672',
      queue: name,
      pool,
      schema,
      consumer: name,
      prefetch: 200,
      batch: true,
      batchSize: 100,
      logger: false,
      handler,
    });
  }
  if (broker === 'sqs') {
    const { SQSClient } = await import('@aws-sdk/client-sqs');
    const { createSqsConsumer } = await import('@once/sqs');
    const client = new SQSClient({
      endpoint: 'http://127.0.0.1:9324',
      region: 'us-east-1',
      credentials: { accessKeyId: 'soak', secretAccessKey: 'soak' },
    });
    return createSqsConsumer({
      client,
      queueUrl: process.env.SOAK_QUEUE_URL,
      pool,
      schema,
      consumer: name,
      batch: true,
      receivers: 2,
      deadLetterQueueUrl: false,
      waitTimeSeconds: 1,
      logger: false,
      handler,
    });
  }
  if (broker === 'nats') {
    const { connect } = await import('@nats-io/transport-node');
    const { createNatsConsumer } = await import('@once/nats');
    const connection = await connect({ servers: 'nats://127.0.0.1:4222', name });
    const c = createNatsConsumer({
      connection,
      subject: `${name}.in`,
      stream: name,
      durable: 'once',
      consumer: name,
      deadLetterSubject: false,
      pool,
      schema,
      batch: true,
      batchSize: 100,
      logger: false,
      handler,
    });
    c.on('consumer:state', (e) => {
      if (e.state === 'stopped') void connection.close();
    });
    return c;
  }
  throw new Error(`unknown broker ${broker}`);
}

const consumer = await make();
let processed = 0;
consumer.inbox.on('message:processed', () => {
  processed++;
});
consumer.on?.('error', (e) => process.send({ type: 'error', message: String(e?.error?.message ?? e) }));
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const sample = () => {
  const before = process.memoryUsage();
  global.gc();
  const after = process.memoryUsage();
  process.send({
    type: 'sample',
    s: (performance.now() - t0) / 1000,
    processed,
    rss: after.rss,
    heapUsed: before.heapUsed,
    heapAfterGc: after.heapUsed,
    external: after.external,
    arrayBuffers: after.arrayBuffers,
  });
};
await consumer.start();
sample();
const timer = setInterval(sample, SAMPLE_MS);
const progress = setInterval(() => process.send({ type: 'progress', processed }), 250);
await new Promise((resolve) => {
  const check = setInterval(() => {
    if (processed >= N || performance.now() - t0 > MAX_MS) {
      clearInterval(check);
      resolve();
    }
  }, 50);
});
clearInterval(timer);
sample();
const cpu = process.cpuUsage(cpu0);
process.send({
  type: 'done',
  processed,
  seconds: (performance.now() - t0) / 1000,
  cpuUsPerMsg: (cpu.user + cpu.system) / processed,
});
clearInterval(progress);
await consumer.stop();
await pool.end();
process.exit(0);
