// `npm run demo`: for each broker, publish messages with injected duplicates, consume them with
// a once consumer in a child process, SIGKILL it mid-run, restart it, and check that every
// unique message had exactly one effect. Exit 0 only when every broker's row holds.
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import amqp from 'amqplib';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { migrate } from '../packages/core/dist/index.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const N = Number(process.env.DEMO_MESSAGES ?? 2000);
const DUP_SHARE = 0.25;

// Services: use the running ones or start them (scripts/services is the one way to do that).
const env = spawnSync('bash', [`${root}scripts/services`, 'env'], { encoding: 'utf8' }).stdout;
for (const m of env.matchAll(/^export (\w+)=(.*)$/gm)) process.env[m[1]] ??= m[2].replace(/^['"]|['"]$/g, '');
const started = spawnSync('bash', [`${root}scripts/services`, 'start'], {
  stdio: ['ignore', 'ignore', 'inherit'],
});
if (started.status !== 0) {
  console.error('demo: services did not start (see above); try `npm run services start`');
  process.exit(1);
}

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
pool.on('error', () => {});
const SCHEMA = 'once_demo';
await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(pool, { schema: SCHEMA });
await pool.query(
  `CREATE TABLE ${SCHEMA}.demo_effects (seq bigserial, broker text NOT NULL, id text NOT NULL)`,
);
const run = Date.now().toString(36);

/** The messages: N unique ids, and DUP_SHARE of them sent again with the same id. */
function stream() {
  const ids = Array.from({ length: N }, (_, i) => `order-${run}-${i}`);
  const dups = ids.filter(() => Math.random() < DUP_SHARE);
  // A re-send carries the same body (a producer retry): same id, same payload fingerprint.
  const body = (id) => JSON.stringify({ id, amount: (Number(id.split('-').at(-1)) % 90) + 10 });
  return [...ids, ...dups].map((id) => ({ id, body: body(id) }));
}

const producers = {
  async kafka(messages) {
    const topic = `once-demo-${run}`;
    const kafka = new Kafka({ brokers: process.env.KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
    await admin.disconnect();
    const producer = kafka.producer();
    await producer.connect();
    for (let i = 0; i < messages.length; i += 500) {
      await producer.send({
        topic,
        messages: messages
          .slice(i, i + 500)
          .map((m) => ({ key: m.id, value: m.body, headers: { 'message-id': m.id } })),
      });
    }
    await producer.disconnect();
    const lagAdmin = kafka.admin();
    await lagAdmin.connect();
    return {
      source: topic,
      // Messages not yet committed by the consumer group.
      pending: async () => {
        const ends = await lagAdmin.fetchTopicOffsets(topic);
        const [committed] = await lagAdmin.fetchOffsets({ groupId: `demo.kafka-group`, topics: [topic] });
        let lag = 0;
        for (const p of ends) {
          const c = committed?.partitions.find((x) => x.partition === p.partition);
          lag += Number(p.offset) - Math.max(0, Number(c?.offset ?? 0));
        }
        return lag;
      },
      cleanup: async () => lagAdmin.disconnect(),
    };
  },
  async rabbitmq(messages) {
    const queue = `once-demo-${run}`;
    const conn = await amqp.connect(process.env.AMQP_URL);
    const ch = await conn.createConfirmChannel();
    await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    for (const m of messages)
      ch.sendToQueue(queue, Buffer.from(m.body), { messageId: m.id, persistent: true });
    await ch.waitForConfirms();
    await conn.close();
    const watch = await amqp.connect(process.env.AMQP_URL);
    const wch = await watch.createChannel();
    return {
      source: queue,
      // Ready plus unacknowledged messages, in the work queue and in the quarantine.
      pending: async () => {
        let n = 0;
        for (const q of [queue, `${queue}.quarantine`]) {
          const info = await wch.checkQueue(q).catch(() => ({ messageCount: 0 }));
          n += info.messageCount;
        }
        return n + (await rabbitUnacked(queue));
      },
      cleanup: async () => {
        const c = await amqp.connect(process.env.AMQP_URL);
        const cc = await c.createChannel();
        for (const q of [queue, `${queue}.quarantine`, `${queue}.dead`])
          await cc.deleteQueue(q).catch(() => {});
        await c.close().catch(() => {});
        await watch.close().catch(() => {});
      },
    };
  },
  async sqs(messages) {
    const client = new SQSClient({
      endpoint: process.env.SQS_ENDPOINT,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    const make = async (name) =>
      (await client.send(new CreateQueueCommand({ QueueName: name, Attributes: { FifoQueue: 'true' } })))
        .QueueUrl;
    const url = await make(`once-demo-${run}.fifo`);
    process.env.DEMO_SQS_DLQ = await make(`once-demo-${run}-dlq.fifo`);
    for (let i = 0; i < messages.length; i += 10) {
      const batch = messages.slice(i, i + 10);
      const res = await client.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: batch.map((m, k) => ({
            Id: String(k),
            MessageBody: m.body,
            MessageGroupId: `account-${Number(m.id.split('-').at(-1)) % 20}`,
            // A fresh deduplication id per send: the re-sends are duplicates SQS cannot catch.
            MessageDeduplicationId: randomUUID(),
            MessageAttributes: { 'message-id': { DataType: 'String', StringValue: m.id } },
          })),
        }),
      );
      if (res.Failed?.length) throw new Error(`SQS refused ${res.Failed.length} entries`);
    }
    return {
      source: url,
      pending: async () => {
        const a = await client.send(
          new GetQueueAttributesCommand({
            QueueUrl: url,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
          }),
        );
        return (
          Number(a.Attributes.ApproximateNumberOfMessages) +
          Number(a.Attributes.ApproximateNumberOfMessagesNotVisible)
        );
      },
      cleanup: async () => {
        for (const q of [url, process.env.DEMO_SQS_DLQ])
          await client.send(new DeleteQueueCommand({ QueueUrl: q })).catch(() => {});
      },
    };
  },
};

function startWorker(broker, source) {
  const child = spawn(
    process.execPath,
    [`${root}scripts/demo/worker.mjs`, broker, SCHEMA, source, `demo.${broker}`],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: process.env,
    },
  );
  const state = { child, last: { processed: 0, duplicate: 0, conflict: 0, failed: 0, retry: 0 } };
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d.toString();
    const lines = buf.split('\n');
    buf = lines.pop();
    for (const line of lines) {
      try {
        state.last = JSON.parse(line);
      } catch {}
    }
  });
  return state;
}

const effects = async (broker) =>
  (
    await pool.query(
      `SELECT count(*)::int AS total, count(DISTINCT id)::int AS uniq FROM ${SCHEMA}.demo_effects WHERE broker = $1`,
      [broker],
    )
  ).rows[0];
/** Unacknowledged messages of a queue, from rabbitmqctl (AMQP has no way to ask). */
async function rabbitUnacked(queue) {
  const out = spawnSync('rabbitmqctl', ['-q', 'list_queues', 'name', 'messages_unacknowledged'], {
    encoding: 'utf8',
  });
  const line = (out.stdout ?? '').split('\n').find((l) => l.split(/\s+/)[0] === queue);
  return line ? Number(line.split(/\s+/)[1]) || 0 : 0;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const rows = [];
for (const broker of ['kafka', 'rabbitmq', 'sqs']) {
  const t0 = Date.now();
  const messages = stream();
  const { source, cleanup, pending } = await producers[broker](messages);
  const workers = [startWorker(broker, source)];
  // Kill the consumer once it is part-way through, then start a new one.
  while ((await effects(broker)).total < N * 0.4 && Date.now() - t0 < 90_000) await sleep(50);
  workers[0].child.kill('SIGKILL');
  await new Promise((r) => workers[0].child.once('exit', r));
  workers.push(startWorker(broker, source));
  let stableSince = Date.now();
  let last = -1;
  while (Date.now() - t0 < 180_000) {
    const e = await effects(broker);
    if (e.total !== last) {
      last = e.total;
      stableSince = Date.now();
    }
    if (e.uniq >= N && Date.now() - stableSince > 1000 && (await pending()) === 0) break;
    await sleep(200);
  }
  const live = workers[1];
  live.child.kill('SIGTERM');
  await new Promise((r) => live.child.once('close', r));
  await cleanup();
  const e = await effects(broker);
  if (process.env.DEMO_DEBUG)
    console.log(
      broker,
      workers.map((w) => w.last),
    );
  const seen = workers.reduce(
    (s, w) => s + w.last.processed + w.last.duplicate + w.last.conflict + w.last.failed,
    0,
  );
  const dropped = workers.reduce((s, w) => s + w.last.duplicate, 0);
  rows.push({
    broker,
    sent: messages.length,
    unique: N,
    seen,
    dropped,
    effects: e.total,
    ok: e.total === N && e.uniq === N,
    seconds: ((Date.now() - t0) / 1000).toFixed(1),
  });
}
await pool.end();

console.log(
  `\nonce demo: ${N} unique messages per broker, ${Math.round(DUP_SHARE * 100)} % re-sent with the same id,`,
);
console.log('the consumer SIGKILLed part-way and restarted.\n');
console.log(
  'broker     sent  unique  deliveries seen*  duplicates dropped  effects  effects = unique   time',
);
for (const r of rows) {
  console.log(
    `${r.broker.padEnd(9)} ${String(r.sent).padStart(5)} ${String(r.unique).padStart(7)} ${String(r.seen).padStart(17)} ${String(
      r.dropped,
    ).padStart(
      19,
    )} ${String(r.effects).padStart(8)}  ${(r.ok ? 'yes' : 'NO').padStart(16)} ${r.seconds.padStart(6)} s`,
  );
}
console.log('\n* as reported by the consumers; the last few milliseconds of the killed one are not counted.');
process.exit(rows.every((r) => r.ok) ? 0 : 1);
