// The Kafka adapter's own CPU per message, without Kafka or PostgreSQL: @once/kafka's consumer
// over a fake kafkajs (6 partitions, 3 at a time, batches of 1,000 messages, eachBatch payloads as
// kafkajs hands them over) and fake.mjs's fake pool, beside the bench's floor consumers
// (bench/kafka/run.mjs: eachMessage for floor-msg, slices of 500 for floor-batch) and the inbox
// alone (inbox-msg, inbox-batch: core's inbox called from the floor's slice loop, one message or one
// slice at a time), over the same fakes. once − inbox is the adapter's own JavaScript.
// Usage: PROFILE_VARIANT=once-msg|once-batch|floor-msg|floor-batch|inbox-msg|inbox-batch
//   PROFILE_N=100000 [PROFILE_WARM=20000] [PROFILE_OUT=x.cpuprofile]
//   [PROFILE_BUILD=<a copy of @once/kafka's dist/index.js>] node bench/profile/fake-kafka.mjs
// bench/profile/instructions.sh counts its instructions per message.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
import { floorBatch, floorOne } from '../support/floor.mjs';
import { fakePool } from './fake-pg.mjs';
import { threadNs } from './threads.mjs';

const env = process.env;
const VARIANT = env.PROFILE_VARIANT ?? 'once-msg';
const N = Number(env.PROFILE_N ?? 100_000);
const WARM = Number(env.PROFILE_WARM ?? 20_000);
const SLICE = Number(env.BENCH_SLICE ?? 500);
const CONCURRENCY = Number(env.BENCH_CONCURRENCY ?? 3);
const PARTITIONS = 6;
const FETCH = 1000;
const TOPIC = 'fake-topic';
const batch = VARIANT.endsWith('batch');
const TOTAL = WARM + N;

/** Each partition's messages, as kafkajs decodes them (the bench's producer's key, value, header). */
const logs = Array.from({ length: PARTITIONS }, () => []);
for (let k = 0; k < TOTAL; k++) {
  const p = logs[k % PARTITIONS];
  p.push({
    key: Buffer.from(`customer-${k % 97}`),
    value: Buffer.from(JSON.stringify({ order: k, amount: (k % 50) + 1 })),
    timestamp: '1700000000000',
    attributes: 0,
    offset: String(p.length),
    size: 0,
    headers: { 'message-id': Buffer.from(`order-${k}`) },
  });
}

/** A fake kafkajs consumer: one group member owning every partition, fetching from its position. */
function fakeConsumer() {
  const listeners = new Map();
  const position = new Array(PARTITIONS).fill(0);
  let running = false;
  const c = {
    events: { GROUP_JOIN: 'consumer.group_join', CRASH: 'consumer.crash' },
    on(name, fn) {
      listeners.set(name, fn);
    },
    async connect() {},
    async subscribe() {},
    async disconnect() {
      running = false;
    },
    async stop() {
      running = false;
    },
    pause() {},
    resume() {},
    seek({ partition, offset }) {
      position[partition] = Number(offset);
    },
    async commitOffsets() {},
    async run({ eachBatch, eachMessage, partitionsConsumedConcurrently = 1 }) {
      running = true;
      listeners.get(c.events.GROUP_JOIN)?.({
        payload: { memberId: 'fake-member', memberAssignment: { [TOPIC]: [...logs.keys()] } },
      });
      let next = 0;
      const worker = async () => {
        while (running) {
          // The next partition with messages left, in turn.
          let p = -1;
          for (let k = 0; k < PARTITIONS; k++) {
            const q = (next + k) % PARTITIONS;
            if (position[q] < logs[q].length && !busy[q]) {
              p = q;
              break;
            }
          }
          if (p < 0) {
            await new Promise((r) => setImmediate(r));
            if (position.every((x, q) => x >= logs[q].length)) return;
            continue;
          }
          next = (p + 1) % PARTITIONS;
          busy[p] = true;
          const messages = logs[p].slice(position[p], position[p] + FETCH);
          let resolved = position[p] - 1;
          const payload = {
            batch: {
              topic: TOPIC,
              partition: p,
              highWatermark: String(logs[p].length),
              messages,
              isEmpty: () => messages.length === 0,
              firstOffset: () => messages[0]?.offset ?? null,
              lastOffset: () => messages[messages.length - 1].offset,
              offsetLag: () => '0',
              offsetLagLow: () => '0',
            },
            resolveOffset: (offset) => {
              resolved = Number(offset);
            },
            heartbeat: async () => {},
            pause: () => () => {},
            commitOffsetsIfNecessary: async () => {},
            uncommittedOffsets: () => ({ topics: [] }),
            isRunning: () => running,
            isStale: () => false,
          };
          if (eachBatch) await eachBatch(payload);
          else {
            for (const message of messages) {
              await eachMessage({
                topic: TOPIC,
                partition: p,
                message,
                heartbeat: payload.heartbeat,
                pause: payload.pause,
              });
              payload.resolveOffset(message.offset);
              await payload.heartbeat();
            }
          }
          // kafkajs fetches again from after the last resolved offset (a seek moves it too).
          if (position[p] === Number(messages[0].offset)) position[p] = resolved + 1;
          busy[p] = false;
          await new Promise((r) => setImmediate(r));
        }
      };
      const busy = new Array(PARTITIONS).fill(false);
      for (let w = 0; w < partitionsConsumedConcurrently; w++) void worker();
    },
  };
  return c;
}

const fakeKafka = {
  consumer: () => fakeConsumer(),
  producer: () => ({ connect: async () => {}, disconnect: async () => {}, send: async () => [] }),
  admin: () => ({
    connect: async () => {},
    disconnect: async () => {},
    listTopics: async () => [TOPIC],
    describeConfigs: async () => ({ resources: [] }),
    fetchOffsets: async () => [
      { topic: TOPIC, partitions: logs.map((_, partition) => ({ partition, offset: '-1', metadata: null })) },
    ],
  }),
};

const { pool } = fakePool();
const fakeQuery = pool.query;
// The schema check: answer it as a current schema.
pool.query = (t) =>
  String(t?.text ?? t).includes('schema_version')
    ? Promise.resolve({ rows: [{ version: 1e9, compatible_from: 0 }], rowCount: 1 })
    : fakeQuery(t);
const EFFECT = 'INSERT INTO effects (variant, id, amount) VALUES ($1, $2, $3)';
const effect = (q, id, amount) => q.query(EFFECT, [VARIANT, id, amount]);

let done = 0;
const marks = new Map();
const reached = (k) => new Promise((r) => marks.set(k, r));
const onDone = (n = 1) => {
  for (let k = 0; k < n; k++) marks.get(++done)?.();
};
const warmed = reached(WARM);
const finished = reached(TOTAL);

/** bench/kafka/run.mjs's sliced: `work(slice)` per slice, offsets after. */
function sliced(work) {
  return async ({ batch: b, resolveOffset, commitOffsetsIfNecessary, heartbeat }) => {
    for (let i = 0; i < b.messages.length; i += SLICE) {
      const slice = b.messages.slice(i, i + SLICE);
      await work(slice);
      const last = slice[slice.length - 1].offset;
      resolveOffset(last);
      await commitOffsetsIfNecessary({
        topics: [
          { topic: b.topic, partitions: [{ partition: b.partition, offset: String(BigInt(last) + 1n) }] },
        ],
      });
      onDone(slice.length);
      await heartbeat();
    }
  };
}

let stop;
const consumer = fakeKafka.consumer();
if (VARIANT === 'floor-msg') {
  await consumer.run({
    partitionsConsumedConcurrently: CONCURRENCY,
    eachMessage: async ({ message }) => {
      const body = JSON.parse(message.value.toString());
      const id = message.headers['message-id'].toString();
      await floorOne(pool, 'fake', 'floor-kafka', id, (q) => effect(q, id, body.amount));
      onDone();
    },
  });
  stop = () => consumer.stop();
} else if (VARIANT === 'floor-batch') {
  await consumer.run({
    partitionsConsumedConcurrently: CONCURRENCY,
    eachBatch: sliced((slice) =>
      floorBatch(
        pool,
        'fake',
        'floor-kafka',
        slice,
        (m) => m.headers['message-id'].toString(),
        (q, m) => effect(q, m.headers['message-id'].toString(), JSON.parse(m.value.toString()).amount),
      ),
    ),
  });
  stop = () => consumer.stop();
} else if (VARIANT.startsWith('inbox')) {
  const { createInbox } = await import('@once/core');
  const inbox = createInbox({
    pool,
    schema: 'fake',
    consumer: 'inbox-kafka',
    handler: async (e, { tx }) => {
      const body = JSON.parse(e.body.toString());
      await effect(tx, e.id, body.amount);
    },
  });
  await inbox.ready();
  const envelope = (m, partition) => ({
    id: m.headers['message-id'].toString(),
    body: m.value,
    headers: { 'message-id': m.headers['message-id'].toString() },
    key: m.key.toString(),
    source: { broker: 'kafka', queue: TOPIC, partition, offset: m.offset, group: 'g' },
    attempt: 1,
    redelivered: false,
  });
  const check = (o) => {
    if (o.status !== 'processed') throw new Error(`unexpected ${o.status}`);
  };
  await consumer.run({
    partitionsConsumedConcurrently: CONCURRENCY,
    eachBatch: async (payload) => {
      const p = payload.batch.partition;
      await sliced(async (slice) => {
        if (batch) (await inbox.processBatch(slice.map((m) => envelope(m, p)))).forEach(check);
        else for (const m of slice) check(await inbox.process(envelope(m, p)));
      })(payload);
    },
  });
  stop = () => consumer.stop();
} else {
  const { createKafkaConsumer } = await import(env.PROFILE_BUILD ?? '@once/kafka');
  const c = createKafkaConsumer({
    kafka: fakeKafka,
    groupId: 'fake-group',
    topics: [TOPIC],
    pool,
    schema: 'fake',
    batch,
    batchSize: SLICE,
    concurrency: CONCURRENCY,
    fromBeginning: true,
    deadLetterTopic: false,
    handler: async (e, { tx }) => {
      const body = JSON.parse(e.body.toString());
      await effect(tx, e.id, body.amount);
    },
  });
  // As the bench counts: processed (or duplicate) outcomes, after COMMIT.
  c.inbox.on('message:processed', () => onDone());
  await c.start();
  stop = () => c.stop();
}

await warmed;
let gcs = 0;
const obs = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (e.detail?.kind === 1) gcs++;
});
obs.observe({ entryTypes: ['gc'] });
const session = env.PROFILE_OUT ? new Session() : undefined;
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
  writeFileSync(env.PROFILE_OUT, JSON.stringify(profile));
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
