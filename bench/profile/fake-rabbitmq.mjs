// The RabbitMQ adapter's own CPU per message, without a broker or PostgreSQL: @once/rabbitmq's
// consumer over a fake amqplib channel (deliveries handed over as the prefetch window frees, in one
// macrotask per "socket read", like amqplib's) and fake.mjs's fake pool, beside the bench's floor
// consumer (bench/rabbitmq/run.mjs's perMessage and batched, the frozen floor) over the same fakes.
// What is left is the JavaScript each runs per message; minus fake.mjs's figures (core alone), the
// adapter's share. inbox-msg, inbox-batch: the floor's consumers calling core's inbox directly (core
// without the adapter): once − inbox is the adapter's own JavaScript.
// Usage: FAKE_VARIANT=once-msg|once-batch|floor-msg|floor-batch|inbox-msg|inbox-batch FAKE_N=100000
//   [FAKE_WARM=20000] [PROFILE_OUT=x.cpuprofile] [PROFILE_BUILD=<a copy of @once/rabbitmq's dist/index.js>]
//   node bench/profile/fake-rabbitmq.mjs
import { EventEmitter } from 'node:events';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
import { floorBatch, floorOne } from '../support/floor.mjs';
import { fakePool } from './fake-pg.mjs';
import { threadNs } from './threads.mjs';

// compare.mjs passes PROFILE_VARIANT, PROFILE_N and PROFILE_WARM (COMPARE_SCRIPT=fake-rabbitmq.mjs).
const env = process.env;
const VARIANT = env.FAKE_VARIANT ?? env.PROFILE_VARIANT ?? 'once-msg';
const N = Number(env.FAKE_N ?? env.PROFILE_N ?? 100_000);
const WARM = Number(env.FAKE_WARM ?? env.PROFILE_WARM ?? 20_000);
const PREFETCH = Number(process.env.BENCH_PREFETCH ?? 200);
const MSG_CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const QUEUE = 'fake-q';
const batch = VARIANT.endsWith('batch');
const TOTAL = WARM + N;

/** The fake channel: a queue of TOTAL messages, delivered while the prefetch window has room. */
class FakeChannel extends EventEmitter {
  window = Number.POSITIVE_INFINITY;
  next = 1;
  low = 1;
  outstanding = new Set();
  cb;
  scheduled = false;
  async prefetch(n) {
    this.window = n;
  }
  async consume(_queue, cb) {
    this.cb = cb;
    this.schedule();
    return { consumerTag: 'fake-ctag' };
  }
  schedule() {
    if (this.scheduled || !this.cb) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.cb && this.outstanding.size < this.window && this.next <= TOTAL) {
        const tag = this.next++;
        this.outstanding.add(tag);
        this.cb(message(tag));
      }
    });
  }
  ack(m, allUpTo) {
    const tag = m.fields.deliveryTag;
    if (allUpTo) {
      for (let t = this.low; t <= tag; t++) this.outstanding.delete(t);
      this.low = tag + 1;
    } else this.outstanding.delete(tag);
    this.schedule();
  }
  nack() {
    throw new Error('fake: nack');
  }
  async cancel() {
    this.cb = undefined;
  }
  async close() {
    this.cb = undefined;
  }
  async assertQueue() {}
  async checkQueue() {}
  async assertExchange() {}
  async bindQueue() {}
  publish() {
    throw new Error('fake: publish');
  }
}

/** A delivery as amqplib hands it over (a persistent message with a message id, no headers). */
function message(tag) {
  const id = `m-${tag}`;
  return {
    fields: {
      consumerTag: 'fake-ctag',
      deliveryTag: tag,
      redelivered: false,
      exchange: '',
      routingKey: QUEUE,
    },
    properties: {
      contentType: 'application/json',
      contentEncoding: undefined,
      headers: {},
      deliveryMode: 2,
      priority: undefined,
      correlationId: undefined,
      replyTo: undefined,
      expiration: undefined,
      messageId: id,
      timestamp: undefined,
      type: undefined,
      userId: undefined,
      appId: undefined,
      clusterId: undefined,
    },
    content: Buffer.from(`{"id":"${id}","amount":${tag % 100}}`),
  };
}

const channel = new FakeChannel();
// amqplib is CommonJS: replacing its connect before the adapter's first import of it is what the
// adapter's `import { connect } from 'amqplib'` binds to.
const amqplib = createRequire(import.meta.url)('amqplib');
amqplib.connect = async () => {
  const model = new EventEmitter();
  model.createConfirmChannel = async () => channel;
  model.createChannel = async () => channel;
  model.close = async () => {};
  return model;
};

const { pool } = fakePool();
const fakeQuery = pool.query;
// The schema check: answer it as a current schema.
pool.query = (t) =>
  String(t?.text ?? t).includes('schema_version')
    ? Promise.resolve({ rows: [{ version: 1e9, compatible_from: 0 }], rowCount: 1 })
    : fakeQuery(t);
const EFFECT = 'INSERT INTO effects (variant, id, amount) VALUES ($1, $2, $3)';
const effect = (q, id, amount) => q.query(EFFECT, [QUEUE, id, amount]);

let done = 0;
const marks = new Map();
const reached = (k) => new Promise((r) => marks.set(k, r));
const onDone = () => {
  done++;
  marks.get(done)?.();
};
const warmed = reached(WARM);
const finished = reached(TOTAL);

/** bench/rabbitmq/run.mjs's perMessage. */
async function perMessage(work) {
  const ch = channel;
  await ch.prefetch(PREFETCH);
  const buffer = [];
  let active = 0;
  const pump = () => {
    while (active < MSG_CONCURRENCY && buffer.length > 0) {
      const m = buffer.shift();
      active++;
      work(m)
        .then(() => {
          ch.ack(m);
          onDone();
        })
        .finally(() => {
          active--;
          pump();
        });
    }
  };
  await ch.consume(QUEUE, (m) => {
    buffer.push(m);
    pump();
  });
  return () => ch.close();
}

/** bench/rabbitmq/run.mjs's batched, one batch at a time. */
async function batched(work) {
  const ch = channel;
  await ch.prefetch(PREFETCH);
  const buffer = [];
  let running = 0;
  const pump = async () => {
    if (running >= 1 || buffer.length === 0) return;
    running++;
    const take = buffer.splice(0, BATCH);
    void pump();
    await work(take);
    ch.ack(take[take.length - 1], true);
    for (const _ of take) onDone();
    running--;
    setImmediate(pump);
  };
  await ch.consume(QUEUE, (m) => {
    buffer.push(m);
    void pump();
  });
  return () => ch.close();
}

let stop;
if (VARIANT === 'floor-msg') {
  stop = await perMessage((m) =>
    floorOne(pool, 'fake', QUEUE, m.properties.messageId, (q) =>
      effect(q, m.properties.messageId, JSON.parse(m.content.toString()).amount),
    ),
  );
} else if (VARIANT === 'floor-batch') {
  stop = await batched((take) =>
    floorBatch(
      pool,
      'fake',
      QUEUE,
      take,
      (m) => m.properties.messageId,
      (q, m) => effect(q, m.properties.messageId, JSON.parse(m.content.toString()).amount),
    ),
  );
} else if (VARIANT.startsWith('inbox')) {
  const { createInbox } = await import('@once/core');
  const inbox = createInbox({
    pool,
    schema: 'fake',
    consumer: QUEUE,
    handler: async (e, { tx }) => {
      const body = JSON.parse(e.body.toString());
      await effect(tx, e.id, body.amount);
    },
  });
  await inbox.ready();
  const envelope = (m) => ({
    id: m.properties.messageId,
    body: m.content,
    headers: {},
    key: m.fields.routingKey,
    source: { broker: 'rabbitmq', queue: QUEUE },
    attempt: 1,
    redelivered: false,
  });
  const check = (o) => {
    if (o.status !== 'processed') throw new Error(`unexpected ${o.status}`);
  };
  stop = batch
    ? await batched(async (take) => (await inbox.processBatch(take.map(envelope))).forEach(check))
    : await perMessage(async (m) => check(await inbox.process(envelope(m))));
} else {
  const { createRabbitConsumer } = await import(process.env.PROFILE_BUILD ?? '@once/rabbitmq');
  const consumer = createRabbitConsumer({
    url: 'amqp://fake',
    queue: QUEUE,
    pool,
    schema: 'fake',
    consumer: QUEUE,
    prefetch: PREFETCH,
    concurrency: batch ? 1 : MSG_CONCURRENCY,
    batch,
    batchSize: BATCH,
    handler: async (e, { tx }) => {
      const body = JSON.parse(e.body.toString());
      await effect(tx, e.id, body.amount);
    },
  });
  consumer.on('settled', (e) => {
    if (e.status === 'processed') onDone();
    else throw new Error(`unexpected ${e.status}`);
  });
  await consumer.start();
  stop = () => consumer.stop();
}

await warmed;
let gcs = 0;
const obs = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (e.detail?.kind === 1) gcs++;
});
obs.observe({ entryTypes: ['gc'] });
const session = process.env.PROFILE_OUT ? new Session() : undefined;
if (session) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
}
gcs = 0;
// Under callgrind (bench/profile/instructions.sh), os.loadavg() marks the measured window.
loadavg();
const threads0 = threadNs();
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await finished;
const secs = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const threads1 = threadNs();
loadavg();
if (session) {
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(process.env.PROFILE_OUT, JSON.stringify(profile));
  session.disconnect();
}
obs.disconnect();
await stop();
console.log(
  JSON.stringify({
    variant: VARIANT,
    n: N,
    msgsPerSec: Math.round(N / secs),
    cpuUsPerMsg: Number(((cpu.user + cpu.system) / N).toFixed(2)),
    userUsPerMsg: Number((cpu.user / N).toFixed(2)),
    systemUsPerMsg: Number((cpu.system / N).toFixed(2)),
    mainThreadUsPerMsg: threads1 ? Number(((threads1.main - threads0.main) / 1000 / N).toFixed(2)) : null,
    otherThreadsUsPerMsg: threads1 ? Number(((threads1.other - threads0.other) / 1000 / N).toFixed(2)) : null,
    scavengesPer1k: Number(((gcs * 1000) / N).toFixed(2)),
  }),
);
process.exit(0);
