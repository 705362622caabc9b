// One consumer process of the campaign. MODE=once runs the real adapter from packages' dist/
// (@once/kafka, @once/sqs, @once/rabbitmq) whose handler writes one effect row in the
// transaction; MODE=naive is the control: same broker, its own group/queue, no once: it writes
// the effect (autocommit) and then acks.
//
// Protocol, one JSON object per stdout line (a pipe: written synchronously on Linux, so a line
// printed before a self-SIGKILL gets out):
//   {t:'ready'}                            consuming
//   {t:'claim', id, unit}                  the handler started: the id is claimed in an open transaction
//   {t:'commit', id}                       the transaction committed (inbox event), not yet settled
//   {t:'settle', unit?, ids?, upTo?}       the broker was told (Kafka: offsets of a partition up to
//                                          upTo committed; SQS: ids deleted; RabbitMQ: ids acked)
//   {t:'dying', id}                        armed kill: the process SIGKILLs itself after a COMMIT
//   {t:'start-failed', error}              start() threw (PostgreSQL down); exits with code 6
// Every line also carries `ts`, the child's Date.now() when it was written: a line is read some
// milliseconds later, and a partition counts only for work not settled before its rules were in.
// Commands on stdin, one per line: `arm-commit-kill`.
// Config: JSON in CHAOS_CHILD (see run-broker.mjs: childConfig). With `tenants` (`--tenants`), the
// once consumer runs over those databases (`databases` + `route`, by the message's key; see
// tenants.mjs) and writes each effect in its tenant's database; `commit` lines name the tenant.
import net from 'node:net';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { tenantOfKey } from './tenants.mjs';

const cfg = JSON.parse(process.env.CHAOS_CHILD ?? '{}');
const say = (o) => process.stdout.write(`${JSON.stringify({ ...o, ts: Date.now() })}\n`);
const pool = new pg.Pool({
  connectionString: cfg.databaseUrl,
  max: 8,
  application_name: `chaos-${cfg.mode}`,
});
pool.on('error', () => {});
/** tenant name -> pool, when the once consumer routes over tenant databases. */
const tenantPools =
  cfg.mode === 'once' && cfg.tenants
    ? Object.fromEntries(
        cfg.tenants.map(({ name, url }) => {
          const p = new pg.Pool({ connectionString: url, max: 4, application_name: 'chaos-once' });
          p.on('error', () => {});
          return [name, p];
        }),
      )
    : undefined;
const keyOfEnvelope = (envelope) => JSON.parse(envelope.body.toString()).key;
const handlerDelayMs = cfg.handlerDelayMs ?? 10;
// Warnings and errors go to stderr, which the campaign keeps for the report of an unexpected exit.
const logLine = (level) => (fields, message) =>
  process.stderr.write(
    `${level} ${typeof fields === 'string' ? fields : message} ${JSON.stringify(fields)}\n`,
  );
const logger = { debug() {}, info() {}, warn: logLine('warn'), error: logLine('error') };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let armed = false;
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() === 'arm-commit-kill') armed = true;
});

function unitOf(broker, source, key) {
  if (broker === 'kafka') return `p${source.partition}`;
  if (broker === 'sqs') return `g:${key}`;
  return 'q';
}

// ---- once ---------------------------------------------------------------------------------
async function buildOnce() {
  const handler = async (envelope, { tx, id }) => {
    const body = JSON.parse(envelope.body.toString());
    say({
      t: 'claim',
      id,
      unit: unitOf(cfg.broker, envelope.source, body.key),
      offset: envelope.source.offset,
    });
    await tx.query(`INSERT INTO ${cfg.effectsTable} (message_id, key, payload) VALUES ($1, $2, $3)`, [
      id,
      body.key,
      String(body.seq),
    ]);
    if (handlerDelayMs) await sleep(handlerDelayMs);
  };
  const where = tenantPools
    ? { databases: tenantPools, route: (envelope) => tenantOfKey(keyOfEnvelope(envelope)) }
    : { pool };
  const common = { ...where, schema: cfg.schema, consumer: 'chaos', handler, logger };
  if (cfg.broker === 'kafka') {
    const { createKafkaConsumer } = await import('@once/kafka');
    const c = createKafkaConsumer({
      kafka: await onceKafkaClient(),
      groupId: cfg.groupId,
      topics: [cfg.topic],
      fromBeginning: true,
      sessionTimeoutMs: 6_000,
      heartbeatIntervalMs: 500,
      batchSize: 10,
      ...common,
    });
    c.on('slice:done', (e) => say({ t: 'settle', unit: `p${e.partition}`, upTo: e.lastOffset }));
    return c;
  }
  if (cfg.broker === 'sqs') {
    const { createSqsConsumer } = await import('@once/sqs');
    return createSqsConsumer({
      client: await sqsClient(),
      queueUrl: cfg.queueUrl,
      deadLetterQueueUrl: cfg.dlqUrl,
      waitTimeSeconds: 1,
      visibilityTimeoutS: 3,
      ...common,
    });
  }
  if (cfg.broker === 'nats') {
    const { createNatsConsumer } = await import('@once/nats');
    const c = createNatsConsumer({
      servers: cfg.natsUrl,
      subject: cfg.subject,
      stream: cfg.stream,
      durable: cfg.durable,
      deadLetterSubject: cfg.deadLetterSubject,
      idHeader: 'message-id',
      // ack_wait 6 s, above the handler's deadline: a zombie's messages come back within seconds.
      handlerTimeoutMs: 4_000,
      ackWaitMs: 6_000,
      stopTimeoutMs: 10_000,
      ...common,
    });
    c.on('settled', (e) => say({ t: 'settle', ids: [e.id] }));
    return c;
  }
  const { createRabbitConsumer } = await import('@once/rabbitmq');
  const c = createRabbitConsumer({
    url: cfg.amqpUrl,
    queue: cfg.queue,
    queueType: 'quorum',
    prefetch: 20,
    stopTimeoutMs: 10_000,
    ...common,
  });
  c.on('settled', (e) => say({ t: 'settle', ids: [e.id] }));
  return c;
}

/**
 * The client library the once consumer runs on (`cfg.kafkaClient`, kafkajs by default). kafkajs
 * reaches the fault proxy through its socketFactory; the others have no socket hook and bootstrap
 * at the broker's advertised address, which the slot's namespace sends to the proxy
 * (`cfg.kafkaAdvertised`, set only with namespace partitions).
 */
async function onceKafkaClient() {
  const name = cfg.kafkaClient ?? 'kafkajs';
  if (name === 'kafkajs') {
    const { Kafka, logLevel } = await import('kafkajs');
    return kafkaClient(Kafka, logLevel);
  }
  if (!cfg.kafkaAdvertised) {
    throw new Error(`the ${name} client needs namespace partitions (no advertised-address redirect)`);
  }
  const clientId = `chaos-${cfg.mode}-${process.pid}`;
  if (name === 'platformatic') {
    const { platformatic } = await import('@once/kafka/platformatic');
    return platformatic({ clientId, bootstrapBrokers: [cfg.kafkaAdvertised] });
  }
  if (name === 'confluent') {
    const { KafkaJS } = await import('@confluentinc/kafka-javascript');
    const { confluent } = await import('@once/kafka/confluent');
    return confluent(
      new KafkaJS.Kafka({
        kafkaJS: { clientId, brokers: [cfg.kafkaAdvertised], logLevel: KafkaJS.logLevel.NOTHING },
      }),
    );
  }
  throw new Error(`unknown kafka client '${name}'`);
}

/** Kafka's metadata names the broker's own address: every socket goes to the fault proxy instead. */
function kafkaClient(Kafka, logLevel) {
  return new Kafka({
    clientId: `chaos-${cfg.mode}-${process.pid}`,
    brokers: [cfg.kafkaProxy],
    logLevel: logLevel.NOTHING,
    retry: { retries: 1000, initialRetryTime: 200, maxRetryTime: 2_000 },
    socketFactory: ({ onConnect }) => {
      const [host, port] = cfg.kafkaProxy.split(':');
      const socket = net.connect({ host, port: Number(port) }, onConnect);
      socket.setKeepAlive(true, 60_000);
      return socket;
    },
  });
}

/** An SQS client whose ReceiveMessage and Delete calls are observed, to report settles by id. */
async function sqsClient() {
  const sdk = await import('@aws-sdk/client-sqs');
  const client = new sdk.SQSClient({
    endpoint: cfg.sqsEndpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const byHandle = new Map();
  const send = client.send.bind(client);
  client.send = async (command, ...rest) => {
    const res = await send(command, ...rest);
    if (command instanceof sdk.ReceiveMessageCommand) {
      for (const m of res.Messages ?? []) {
        byHandle.set(m.ReceiptHandle, m.MessageAttributes?.['message-id']?.StringValue);
      }
    } else if (command instanceof sdk.DeleteMessageBatchCommand) {
      const failed = new Set((res.Failed ?? []).map((f) => f.Id));
      for (const e of command.input.Entries ?? []) {
        if (failed.has(e.Id)) continue;
        const id = byHandle.get(e.ReceiptHandle);
        byHandle.delete(e.ReceiptHandle);
        if (id) say({ t: 'settle', ids: [id] });
      }
    } else if (command instanceof sdk.DeleteMessageCommand) {
      const id = byHandle.get(command.input.ReceiptHandle);
      byHandle.delete(command.input.ReceiptHandle);
      if (id) say({ t: 'settle', ids: [id] });
    }
    return res;
  };
  return client;
}

// ---- naive control ------------------------------------------------------------------------
const naiveEffect = (id, key, seq) =>
  pool.query(`INSERT INTO ${cfg.effectsTable} (message_id, key, payload) VALUES ($1, $2, $3)`, [
    id,
    key,
    seq,
  ]);

async function runNaive() {
  if (cfg.broker === 'kafka') {
    const { Kafka, logLevel } = await import('kafkajs');
    const consumer = kafkaClient(Kafka, logLevel).consumer({
      groupId: cfg.groupId,
      sessionTimeout: 6_000,
      heartbeatInterval: 500,
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [cfg.topic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        const id = message.headers['message-id'].toString();
        const body = JSON.parse(message.value.toString());
        await naiveEffect(id, body.key, String(body.seq));
        await consumer.commitOffsets([{ topic, partition, offset: String(BigInt(message.offset) + 1n) }]);
      },
    });
    consumer.on(consumer.events.CRASH, () => process.exit(3));
    say({ t: 'ready' });
    return;
  }
  if (cfg.broker === 'sqs') {
    const sdk = await import('@aws-sdk/client-sqs');
    const client = new sdk.SQSClient({
      endpoint: cfg.sqsEndpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    say({ t: 'ready' });
    for (;;) {
      const res = await client.send(
        new sdk.ReceiveMessageCommand({
          QueueUrl: cfg.queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          VisibilityTimeout: 3,
          MessageAttributeNames: ['All'],
        }),
      );
      for (const m of res.Messages ?? []) {
        const body = JSON.parse(m.Body);
        await naiveEffect(m.MessageAttributes['message-id'].StringValue, body.key, String(body.seq));
        await client.send(
          new sdk.DeleteMessageCommand({ QueueUrl: cfg.queueUrl, ReceiptHandle: m.ReceiptHandle }),
        );
      }
    }
  }
  if (cfg.broker === 'nats') {
    // A plain JetStream pull consumer: effect with autocommit, then ack; any error ends the process.
    const { connect } = await import('@nats-io/transport-node');
    const { jetstream } = await import('@nats-io/jetstream');
    const nc = await connect({ servers: cfg.natsUrl, maxReconnectAttempts: 0 });
    nc.closed().then(() => process.exit(3));
    const consumer = await jetstream(nc).consumers.get(cfg.stream, cfg.durable);
    const messages = await consumer.consume({ max_messages: 10 });
    say({ t: 'ready' });
    for await (const m of messages) {
      const body = JSON.parse(new TextDecoder().decode(m.data));
      try {
        await naiveEffect(m.headers.get('message-id'), body.key, String(body.seq));
        m.ack();
      } catch {
        process.exit(3);
      }
    }
    process.exit(3);
  }
  const amqp = (await import('amqplib')).default;
  const conn = await amqp.connect(cfg.amqpUrl);
  conn.on('error', () => process.exit(3));
  conn.on('close', () => process.exit(3));
  const ch = await conn.createChannel();
  await ch.prefetch(10);
  await ch.consume(cfg.queue, async (m) => {
    if (!m) return process.exit(3);
    const body = JSON.parse(m.content.toString());
    try {
      await naiveEffect(m.properties.messageId, body.key, String(body.seq));
      ch.ack(m);
    } catch {
      process.exit(3);
    }
  });
  say({ t: 'ready' });
}

// ---- main ---------------------------------------------------------------------------------
process.on('unhandledRejection', (err) => {
  process.stderr.write(`unhandled: ${err?.stack ?? err}\n`);
  process.exit(cfg.mode === 'naive' ? 3 : 4);
});

if (cfg.mode === 'naive') {
  await runNaive();
} else {
  const consumer = await buildOnce();
  const onCommitted = (e) => {
    const id = e.id;
    say({ t: 'commit', id, ...(tenantPools && e.database ? { tenant: e.database } : {}) });
    if (armed) {
      // After COMMIT, before the adapter settles: the window a crash must not turn into a
      // second effect. Block the thread so nothing else can run before the signal lands.
      say({ t: 'dying', id });
      process.kill(process.pid, 'SIGKILL');
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    }
  };
  consumer.inbox.on('message:processed', onCommitted);
  try {
    await consumer.start();
  } catch (err) {
    // start() checks the schema first: with PostgreSQL down it fails, and the campaign restarts us.
    say({ t: 'start-failed', error: String(err?.message ?? err) });
    process.exit(6);
  }
  say({ t: 'ready' });
  process.once('SIGTERM', () => {
    const hard = setTimeout(() => process.exit(5), 20_000);
    consumer
      .stop()
      .then(() => Promise.all([pool, ...Object.values(tenantPools ?? {})].map((p) => p.end())))
      .then(() => {
        clearTimeout(hard);
        process.exit(0);
      });
  });
}
