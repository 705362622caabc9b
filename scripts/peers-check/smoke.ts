// A consumer program of the published packages, as a user writes it: type-checked strictly
// against the installed peers' own types (skipLibCheck off), then run against the real services.
// Each broker: a once consumer started, one message sent with that adapter's outbox publisher,
// handled once (its effect in PostgreSQL), the consumer stopped. HTTP: one key sent twice to a
// Fetch, a Fastify and an Express server, one effect and a replay. Exits non-zero on any failure.
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CreateQueueCommand, DeleteQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { type CliIo, ExitCode, run as runCli } from '@once/cli';
import { createInbox, type Handler, migrate } from '@once/core';
import { makeEnvelope } from '@once/core/testing';
import { createIdempotency } from '@once/http';
import { expressIdempotency, keepRawBody } from '@once/http/express';
import { fastifyIdempotency } from '@once/http/fastify';
import { idempotentFetch } from '@once/http/fetch';
import { nodeListener } from '@once/http/node';
import { createKafkaConsumer, createKafkaPublisher } from '@once/kafka';
import { createNatsConsumer, createNatsPublisher } from '@once/nats';
import { instrument, traced } from '@once/otel';
import { createRabbitConsumer, createRabbitPublisher, type SocketOptionsLike } from '@once/rabbitmq';
import { createSqsConsumer, createSqsPublisher } from '@once/sqs';
import { metrics } from '@opentelemetry/api';
import express from 'express';
import Fastify from 'fastify';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';

const env = {
  database: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  kafka: (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
  sqs: process.env.SQS_ENDPOINT ?? 'http://127.0.0.1:9324',
  amqp: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
  nats: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
};
const run = `${process.argv[2] ?? 'peers'}_${process.pid}_${Date.now().toString(36)}`;
const schema = `peers_${run}`;
const pool = new pg.Pool({ connectionString: env.database, max: 8 });
pool.on('error', () => {}); // an idle client's error must not end the run; queries still fail loudly

/** Resolves when `id` was handled, rejects after `ms`. */
function arrival(ms: number): { handled: Handler; done: Promise<string> } {
  let resolve!: (id: string) => void;
  const done = new Promise<string>((res, rej) => {
    resolve = res;
    setTimeout(() => rej(new Error(`no message handled within ${ms} ms`)), ms).unref();
  });
  const handled: Handler = async (envelope, { tx, id }) => {
    await tx.query(`INSERT INTO "${schema}".effects (id, body) VALUES ($1, $2)`, [
      id,
      envelope.body.toString(),
    ]);
    resolve(id);
  };
  return { handled, done };
}

async function effects(id: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM "${schema}".effects WHERE id = $1`,
    [id],
  );
  return Number(rows[0]?.n);
}

/** The effects of `id` once its transaction has committed (the handler resolves before COMMIT). */
async function committed(id: string): Promise<number> {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
    const n = await effects(id);
    if (n > 0) return n;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return 0;
}

async function step(name: string, body: () => Promise<string>): Promise<void> {
  const t = Date.now();
  const said = await body();
  console.log(`  ${name}: ${said} (${Date.now() - t} ms)`);
}

async function inbox(): Promise<string> {
  const ids: string[] = [];
  const box = createInbox({
    pool,
    schema,
    consumer: 'peers.inbox',
    handler: async (envelope, { tx, id }) => {
      ids.push(id);
      await tx.query(`INSERT INTO "${schema}".effects (id, body) VALUES ($1, $2)`, [
        id,
        envelope.body.toString(),
      ]);
    },
  });
  const meter = instrument(box);
  const envelope = makeEnvelope({ id: `inbox-${run}`, body: 'hello' });
  const first = await box.process(envelope);
  const again = await box.process(envelope);
  meter.close();
  if (
    first.status !== 'processed' ||
    again.status !== 'duplicate' ||
    (await effects(envelope.id ?? '')) !== 1
  )
    throw new Error(`inbox: ${first.status} then ${again.status}, handler ran ${ids.length} times`);
  return 'processed, then duplicate; one effect';
}

async function kafka(): Promise<string> {
  const client = new Kafka({ clientId: 'peers-check', brokers: env.kafka, logLevel: logLevel.NOTHING });
  const topic = `peers-${run}`;
  const admin = client.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  const { handled, done } = arrival(60_000);
  const consumer = createKafkaConsumer({
    kafka: client,
    groupId: `peers-${run}`,
    topics: [topic],
    consumer: 'peers.kafka',
    schema,
    pool,
    fromBeginning: true,
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 1000,
    deadLetterTopic: false,
    handler: traced(handled),
  });
  const meter = instrument(consumer);
  const publisher = createKafkaPublisher({ kafka: client });
  try {
    await consumer.start();
    await publisher.start();
    const [sent] = await publisher.publish([
      { id: `kafka-${run}`, destination: topic, key: 'k', body: Buffer.from('hello'), headers: {} },
    ]);
    if (!sent?.ok) throw new Error(`kafka publish: ${JSON.stringify(sent)}`);
    const id = await done;
    if (id !== `kafka-${run}` || (await committed(id)) !== 1) throw new Error(`kafka: handled ${id}`);
  } finally {
    meter.close();
    await consumer.stop();
    await publisher.stop();
    await admin.deleteTopics({ topics: [topic] }).catch(() => {});
    await admin.disconnect();
  }
  return 'consumer started, one message published and handled once, stopped';
}

async function sqs(): Promise<string> {
  const client = new SQSClient({
    endpoint: env.sqs,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const created = await client.send(
    new CreateQueueCommand({ QueueName: `peers-${run}.fifo`, Attributes: { FifoQueue: 'true' } }),
  );
  const queueUrl = created.QueueUrl ?? '';
  const { handled, done } = arrival(60_000);
  const consumer = createSqsConsumer({
    client,
    queueUrl,
    consumer: 'peers.sqs',
    schema,
    pool,
    deadLetterQueueUrl: false,
    waitTimeSeconds: 1,
    handler: traced(handled),
  });
  const meter = instrument(consumer);
  const publisher = createSqsPublisher({ client, queueUrl });
  try {
    await consumer.start();
    const [sent] = await publisher.publish([
      { id: `sqs-${run}`, destination: 'peers', key: 'g1', body: Buffer.from('hello'), headers: {} },
    ]);
    if (!sent?.ok) throw new Error(`sqs publish: ${JSON.stringify(sent)}`);
    const id = await done;
    if (id !== `sqs-${run}` || (await committed(id)) !== 1) throw new Error(`sqs: handled ${id}`);
  } finally {
    meter.close();
    await consumer.stop();
    await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => {});
    client.destroy();
  }
  return 'consumer started, one message published and handled once, stopped';
}

async function rabbitmq(): Promise<string> {
  const queue = `peers-${run}`;
  const socketOptions: SocketOptionsLike = { timeout: 10_000, noDelay: true };
  const { handled, done } = arrival(60_000);
  const consumer = createRabbitConsumer({
    url: env.amqp,
    socketOptions,
    queue,
    queueType: 'classic',
    deadLetterQueue: false,
    consumer: 'peers.rabbitmq',
    schema,
    pool,
    handler: traced(handled),
  });
  const meter = instrument(consumer);
  const publisher = createRabbitPublisher({ url: env.amqp, socketOptions });
  try {
    await consumer.start();
    const [sent] = await publisher.publish([
      { id: `rabbitmq-${run}`, destination: '', key: queue, body: 'hello' },
    ]);
    if (!sent?.ok) throw new Error(`rabbitmq publish: ${JSON.stringify(sent)}`);
    const id = await done;
    if (id !== `rabbitmq-${run}` || (await committed(id)) !== 1) throw new Error(`rabbitmq: handled ${id}`);
  } finally {
    meter.close();
    await consumer.stop();
    await publisher.stop();
  }
  return 'consumer started, one message published and handled once, stopped';
}

async function nats(): Promise<string> {
  // The user's own connection makes the stream; once's consumer and publisher connect themselves.
  const nc = await natsConnect({ servers: env.nats });
  const jsm = await jetstreamManager(nc);
  const stream = `peers_${run}`.replace(/[^A-Za-z0-9_-]/g, '_');
  await jsm.streams.add({ name: stream, subjects: [`${stream}.in`], max_age: 3_600 * 1e9 });
  const { handled, done } = arrival(60_000);
  const consumer = createNatsConsumer({
    servers: env.nats,
    subject: `${stream}.in`,
    deadLetterSubject: false,
    consumer: 'peers.nats',
    schema,
    pool,
    handler: traced(handled),
  });
  const meter = instrument(consumer);
  const publisher = createNatsPublisher({ connection: nc });
  try {
    await consumer.start();
    const [sent] = await publisher.publish([
      {
        id: `nats-${run}`,
        destination: `${stream}.in`,
        key: undefined,
        body: Buffer.from('hello'),
        headers: {},
      },
    ]);
    if (!sent?.ok) throw new Error(`nats publish: ${JSON.stringify(sent)}`);
    const id = await done;
    if (id !== `nats-${run}` || (await committed(id)) !== 1) throw new Error(`nats: handled ${id}`);
  } finally {
    meter.close();
    await consumer.stop();
    await publisher.stop();
    await jsm.streams.delete(stream).catch(() => {});
    await nc.close();
  }
  return 'consumer started, one message published and handled once, stopped';
}

/** Two POSTs with one key: the second must be the replay of the first, and one effect. */
async function sameKeyTwice(url: string, id: string): Promise<void> {
  const send = () =>
    fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `"${id}"`, 'x-account': 'peers' },
      body: JSON.stringify({ id }),
    });
  const first = await send();
  const firstBody = await first.text();
  const again = await send();
  const againBody = await again.text();
  if (first.status !== 201 || again.status !== 201 || againBody !== firstBody)
    throw new Error(`${url}: ${first.status} ${firstBody}, then ${again.status} ${againBody}`);
  if (again.headers.get('idempotent-replayed') !== 'true')
    throw new Error(`${url}: the retry was not a replay`);
  if ((await effects(id)) !== 1) throw new Error(`${url}: ${await effects(id)} effects for one key`);
}

function listening(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  );
}

async function http(): Promise<string> {
  const idempotency = createIdempotency({ pool, schema, consumer: 'peers.http' });
  const effect = (tx: { query: (sql: string, values: unknown[]) => Promise<unknown> }, id: string) =>
    tx.query(`INSERT INTO "${schema}".effects (id, body) VALUES ($1, 'http')`, [id]);
  // Fetch, served by node:http.
  const handler = idempotentFetch(idempotency, {
    scope: (req) => req.headers.get('x-account') ?? 'anonymous',
    handler: async (req, ctx) => {
      const { id } = (await req.json()) as { id: string };
      await effect(ctx.tx, id);
      return Response.json({ id }, { status: 201 });
    },
  });
  const plain = createServer(nodeListener(handler));
  // Fastify, through the plugin.
  const app = Fastify();
  await app.register(fastifyIdempotency, {
    idempotency,
    scope: (request) => String(request.headers['x-account']),
  });
  app.post('/charges', { config: { idempotent: true } }, async (request, reply) => {
    const { id } = request.body as { id: string };
    await effect(request.idempotent.tx, id);
    return reply.code(201).send({ id });
  });
  // Express, through the middleware.
  const idempotent = expressIdempotency({ idempotency, scope: (req) => String(req.headers['x-account']) });
  const web = express();
  web.use(express.json({ verify: keepRawBody }));
  web.post('/charges', idempotent(), async (req, res) => {
    const { id } = req.body as { id: string };
    await effect(req.idempotent.tx, id);
    res.status(201).json({ id });
  });
  const served = createServer(web);
  try {
    await sameKeyTwice(`${await listening(plain)}/charges`, `fetch-${run}`);
    await sameKeyTwice(`${await app.listen({ port: 0, host: '127.0.0.1' })}/charges`, `fastify-${run}`);
    await sameKeyTwice(`${await listening(served)}/charges`, `express-${run}`);
  } finally {
    await app.close();
    await new Promise((resolve) => plain.close(resolve));
    await new Promise((resolve) => served.close(resolve));
  }
  return 'fetch, fastify and express: one key sent twice, one effect, the second a replay';
}

async function cli(): Promise<string> {
  // In-process, through the exported entry point.
  let printed = '';
  const io: CliIo = {
    stdout: { write: (chunk) => (printed += String(chunk)) },
    stderr: process.stderr,
    env: { DATABASE_URL: env.database },
  };
  const code = await runCli(['--schema', schema, '--json', 'status'], io);
  if (code !== ExitCode.Ok) throw new Error(`once status exited ${code}: ${printed}`);
  JSON.parse(printed);
  // And the installed bin, as `npx --no-install once` runs it (throws on a non-zero exit).
  JSON.parse(
    execFileSync('node_modules/.bin/once', ['--schema', schema, '--json', 'status'], {
      env: { ...process.env, DATABASE_URL: env.database },
      encoding: 'utf8',
    }),
  );
  return 'once status --json: exit 0 and JSON, in-process and from the bin';
}

let failed = false;
try {
  // The global provider of whatever @opentelemetry/api is installed (a no-op one here).
  metrics.getMeterProvider();
  await migrate(pool, { schema });
  await pool.query(`CREATE TABLE "${schema}".effects (id text NOT NULL, body text NOT NULL)`);
  await step('core inbox', inbox);
  await step('kafka', kafka);
  await step('sqs', sqs);
  await step('rabbitmq', rabbitmq);
  await step('nats', nats);
  await step('http', http);
  await step('cli', cli);
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
  await pool.end();
}
process.exitCode = failed ? 1 : 0;
