// The SQS adapter's own CPU per message, without ElasticMQ or PostgreSQL: @once/sqs's consumer over
// a fake FIFO queue and fake-pg.mjs's fake pool, beside the bench's floor consumers
// (bench/sqs/run.mjs: four receive loops of ten, a receive's groups in parallel and one group's
// messages one after another, one DeleteMessageBatch per receive after COMMIT; batched, one
// transaction per receive) and the inbox alone (inbox-msg, inbox-batch: core's inbox called from
// the floor's loops), over the same fakes. once − inbox is the adapter's own JavaScript.
// The fake queue answers like ElasticMQ's FIFO queues: a receive takes every visible message of a
// group whose messages are not in flight, then the next such group, up to ten; a group is locked
// while any of its messages is in flight (so with the bench's 50 groups of many messages, a receive
// is one group's ten). Answers come one macrotask later, as a socket read would.
// Two modes (FAKE_MODE):
// - client (default): the consumers' `client` is a fake whose `send(command)` answers by the
//   command's class name with objects shaped like the AWS SDK v3's outputs. No SDK code runs.
// - sdk: a real SQSClient whose requestHandler answers the JSON protocol's HTTP requests with canned
//   HTTP responses (the body a stream, as Node's IncomingMessage is): the SDK's per-call work
//   (middleware, signing, serialising, parsing, the body's MD5 check) is counted; Node's HTTP client
//   and sockets are not. The fake's own answering (parsing a request's JSON, writing the response's)
//   is counted too; it is small beside the SDK's.
// FAKE_PG_MS=<ms> delays each query's answer (see below).
// Prints the SQS calls per message by type in the measured window, with the usual CPU figures.
// Usage: PROFILE_VARIANT=once-msg|once-batch|floor-msg|floor-batch|inbox-msg|inbox-batch
//   PROFILE_N=20000 [PROFILE_WARM=5000] [FAKE_MODE=client|sdk] [PROFILE_OUT=x.cpuprofile]
//   [PROFILE_BUILD=<a copy of @once/sqs's dist/index.js>] node bench/profile/fake-sqs.mjs
// bench/profile/instructions.sh counts its instructions per message (FAKE_MODE passes through).
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { HttpResponse } from '@smithy/core/protocols';
import { floorBatch, floorOne } from '../support/floor.mjs';
import { fakePool } from './fake-pg.mjs';
import { threadNs } from './threads.mjs';

const env = process.env;
const VARIANT = env.PROFILE_VARIANT ?? 'once-msg';
const MODE = env.FAKE_MODE ?? 'client';
const N = Number(env.PROFILE_N ?? 20_000);
const WARM = Number(env.PROFILE_WARM ?? 5_000);
// bench/sqs/run.mjs's shape: 50 groups, B1 and the floor with 4 receive loops, once with one
// receiver holding up to 40, 10 handlers at a time.
const GROUPS = Number(env.BENCH_SQS_GROUPS ?? 50);
const RECEIVERS = Number(env.BENCH_SQS_RECEIVERS ?? 4);
const ONCE_RECEIVERS = Number(env.FAKE_ONCE_RECEIVERS ?? 1);
const MAX_IN_FLIGHT = Number(env.BENCH_SQS_MAX_IN_FLIGHT ?? RECEIVERS * 10);
const CONCURRENCY = 10;
const batch = VARIANT.endsWith('batch');
const TOTAL = WARM + N;
const ORIGIN = 'http://sqs.fake.local:9324';
const NAME = `bench-sqs-clean-12345-mdu3x4k2-0.fifo`;
const QUEUE_URL = `${ORIGIN}/000000000000/${NAME}`;
const SCHEMA = 'fake';

// ---------------------------------------------------------------- the queue

const hex = (n, width) => n.toString(16).padStart(width, '0');
const uuid = (n, salt) => `${hex(salt, 8)}-0000-4000-8000-${hex(n, 12)}`;

/** The TOTAL messages, as the bench sends them (made before the run, not in any window). */
const messages = Array.from({ length: TOTAL }, (_, j) => {
  const body = JSON.stringify({ n: j, amount: 7 });
  return {
    j,
    group: `g${j % GROUPS}`,
    id: uuid(j, 0x2cd54e31),
    body,
    md5: createHash('md5').update(body).digest('hex'),
    attrMd5: createHash('md5').update(`a${j}`).digest('hex'),
    messageId: `${NAME}-${j}`,
  };
});

/** A FIFO queue like ElasticMQ's: groups locked while a message of theirs is in flight. */
class FakeQueue {
  groups = [];
  byName = new Map();
  /** receipt handle -> message */
  inFlight = new Map();
  waiters = [];
  receipts = 0;
  next = 0;
  wakeScheduled = false;
  constructor() {
    for (const m of messages) {
      let g = this.byName.get(m.group);
      if (!g) {
        g = { name: m.group, pending: [], inFlight: 0 };
        this.byName.set(m.group, g);
        this.groups.push(g);
      }
      g.pending.push(m);
    }
  }
  /** Up to `max` messages: a whole free group, then the next, starting one group further each time. */
  take(max) {
    const out = [];
    const G = this.groups.length;
    for (let k = 0; k < G && out.length < max; k++) {
      const g = this.groups[(this.next + k) % G];
      if (g.inFlight > 0 || g.pending.length === 0) continue;
      const got = g.pending.splice(0, max - out.length);
      g.inFlight += got.length;
      for (const m of got) {
        const receipt = `${m.id}#${uuid(++this.receipts, 0xd0cf1fde)}`;
        this.inFlight.set(receipt, m);
        out.push({ m, receipt });
      }
    }
    this.next = (this.next + 1) % G;
    return out;
  }
  /** A receive: answers at once when messages are free, else when some are, or after `waitS`. */
  receive(max, waitS, signal) {
    const got = this.take(max);
    if (got.length > 0 || !waitS) return Promise.resolve(got);
    return new Promise((resolve) => {
      const w = { max, resolve };
      const done = (v) => {
        clearTimeout(w.timer);
        signal?.removeEventListener('abort', w.abort);
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve(v);
      };
      w.done = done;
      w.timer = setTimeout(() => done([]), waitS * 1000);
      w.abort = () => done(undefined);
      signal?.addEventListener('abort', w.abort);
      this.waiters.push(w);
    });
  }
  delete(receipt) {
    const m = this.inFlight.get(receipt);
    if (!m) return false;
    this.inFlight.delete(receipt);
    this.#left(m);
    return true;
  }
  /** Visibility 0: visible again now, back at its group's head. Above 0: an extension, nothing to do. */
  visibility(receipt, seconds) {
    const m = this.inFlight.get(receipt);
    if (!m) return false;
    if (seconds > 0) return true;
    this.inFlight.delete(receipt);
    const g = this.byName.get(m.group);
    const at = g.pending.findIndex((p) => p.j > m.j);
    g.pending.splice(at < 0 ? g.pending.length : at, 0, m);
    this.#left(m);
    return true;
  }
  #left(m) {
    this.byName.get(m.group).inFlight--;
    if (this.waiters.length > 0 && !this.wakeScheduled) {
      this.wakeScheduled = true;
      setImmediate(() => {
        this.wakeScheduled = false;
        for (const w of [...this.waiters]) {
          const got = this.take(w.max);
          if (got.length === 0) break;
          w.done(got);
        }
      });
    }
  }
  /** Ends every waiting receive, empty. */
  close() {
    for (const w of [...this.waiters]) w.done([]);
  }
}
const queue = new FakeQueue();

// ---------------------------------------------------------------- the answers

/** SQS calls in the measured window, by operation; entries of the batch calls; empty receives. */
let counting = false;
const calls = {};
const entries = {};
let emptyReceives = 0;
let visibilityZero = 0;
const count = (op, n) => {
  if (!counting) return;
  calls[op] = (calls[op] ?? 0) + 1;
  if (n !== undefined) entries[op] = (entries[op] ?? 0) + n;
};

const QUEUE_ATTRIBUTES = {
  ApproximateNumberOfMessagesDelayed: '0',
  VisibilityTimeout: '30',
  ApproximateNumberOfMessagesNotVisible: '0',
  LastModifiedTimestamp: '1795581779',
  ContentBasedDeduplication: 'false',
  QueueArn: `arn:aws:sqs:us-east-1:000000000000:${NAME}`,
  CreatedTimestamp: '1795581779',
  ApproximateNumberOfMessages: String(TOTAL),
  FifoQueue: 'true',
  ReceiveMessageWaitTimeSeconds: '0',
  DelaySeconds: '0',
  MessageRetentionPeriod: '345600',
};

/** A received message as ElasticMQ's JSON has it (and so as the SDK's output has it). */
const received = ({ m, receipt }) => ({
  Attributes: {
    ApproximateFirstReceiveTimestamp: '1795581779335',
    SentTimestamp: '1795581779272',
    MessageDeduplicationId: `d${m.j}`,
    SenderId: '127.0.0.1',
    ApproximateReceiveCount: '1',
    MessageGroupId: m.group,
    SequenceNumber: String(32 + m.j),
  },
  Body: m.body,
  MD5OfBody: m.md5,
  MD5OfMessageAttributes: m.attrMd5,
  MessageAttributes: { 'message-id': { DataType: 'String', StringValue: m.messageId } },
  MessageId: m.id,
  ReceiptHandle: receipt,
});

/** One macrotask later, as a response read from a socket. */
const later = (v) => new Promise((resolve) => setImmediate(resolve, v));

/** Answers one operation's input (the JSON protocol's body, parsed) with its output. */
async function answer(op, input, signal) {
  switch (op) {
    case 'ReceiveMessage': {
      const got = await queue.receive(input.MaxNumberOfMessages ?? 1, input.WaitTimeSeconds ?? 0, signal);
      if (got === undefined) {
        const err = new Error('Request aborted');
        err.name = 'AbortError';
        throw err;
      }
      count(op, got.length);
      if (got.length === 0 && counting) emptyReceives++;
      return got.length === 0 ? {} : { Messages: got.map(received) };
    }
    case 'DeleteMessageBatch': {
      count(op, input.Entries.length);
      const Successful = [];
      const Failed = [];
      for (const e of input.Entries) {
        if (queue.delete(e.ReceiptHandle)) Successful.push({ Id: e.Id });
        else Failed.push({ Id: e.Id, Code: 'ReceiptHandleIsInvalid', Message: 'gone', SenderFault: true });
      }
      return Failed.length ? { Successful, Failed } : { Successful };
    }
    case 'ChangeMessageVisibilityBatch': {
      count(op, input.Entries.length);
      const Successful = [];
      for (const e of input.Entries) {
        if (e.VisibilityTimeout === 0 && counting) visibilityZero++;
        queue.visibility(e.ReceiptHandle, e.VisibilityTimeout);
        Successful.push({ Id: e.Id });
      }
      return { Successful };
    }
    case 'ChangeMessageVisibility': {
      count(op, 1);
      if (input.VisibilityTimeout === 0 && counting) visibilityZero++;
      queue.visibility(input.ReceiptHandle, input.VisibilityTimeout);
      return {};
    }
    case 'DeleteMessage':
      count(op, 1);
      queue.delete(input.ReceiptHandle);
      return {};
    case 'GetQueueAttributes':
      count(op);
      return { Attributes: QUEUE_ATTRIBUTES };
    default:
      throw new Error(`fake SQS: no answer for ${op}`);
  }
}

/** FAKE_MODE=client: an object with send(command), answering by the command's class name. */
function fakeClient() {
  return {
    async send(command, options) {
      const op = command.constructor.name.replace(/Command$/, '');
      const output = await answer(op, command.input, options?.abortSignal);
      await later();
      return { ...output, $metadata: { httpStatusCode: 200, attempts: 1, totalRetryDelay: 0 } };
    },
    destroy() {},
  };
}

/** FAKE_MODE=sdk: a real SQSClient over a request handler answering with canned HTTP responses. */
function sdkClient() {
  const requestHandler = {
    async handle(request, options) {
      const op = request.headers['x-amz-target'].slice('AmazonSQS.'.length);
      const b = request.body;
      const text = typeof b === 'string' ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString();
      const output = await answer(op, JSON.parse(text), options?.abortSignal);
      await later();
      const body = Buffer.from(JSON.stringify(output));
      const stream = new Readable({ read() {} });
      stream.push(body);
      stream.push(null);
      return {
        response: new HttpResponse({
          statusCode: 200,
          reason: 'OK',
          headers: {
            'content-type': 'application/json',
            'content-length': String(body.length),
            date: 'Wed, 25 Nov 2026 04:42:58 GMT',
            server: 'pekko-http/1.3.0',
          },
          body: stream,
        }),
      };
    },
    updateHttpClientConfig() {},
    httpHandlerConfigs: () => ({}),
  };
  return new SQSClient({
    endpoint: ORIGIN,
    region: 'us-east-1',
    credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
    requestHandler,
  });
}

const sqs = MODE === 'sdk' ? sdkClient() : fakeClient();

// ---------------------------------------------------------------- the consumers

const { pool, client } = fakePool();
// FAKE_PG_MS: each query answers that many ms later (a round trip's latency; default at once). Only
// to see how the adapter's calls batch when transactions take time, not for instruction counts.
const PG_MS = Number(env.FAKE_PG_MS ?? 0);
if (PG_MS > 0) {
  const at = client.query;
  client.query = (text, values) =>
    at(text, values).then((r) => new Promise((ok) => setTimeout(ok, PG_MS, r)));
}
const fakeQuery = pool.query;
// The schema check: answer it as a current schema.
pool.query = (t) =>
  String(t?.text ?? t).includes('schema_version')
    ? Promise.resolve({ rows: [{ version: 1e9, compatible_from: 0 }], rowCount: 1 })
    : fakeQuery(t);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (id, grp, n) VALUES ($1, $2, $3)`;
const effect = (q, [id, grp, n]) => q.query(EFFECT, [id, grp, n]);

let done = 0;
const marks = new Map();
const reached = (k) => new Promise((r) => marks.set(k, r));
const onDone = (n = 1) => {
  for (let i = 0; i < n; i++) {
    done++;
    marks.get(done)?.();
  }
};
const warmed = reached(WARM);
const finished = reached(TOTAL);

/** bench/sqs/run.mjs's baseline loops: `work(msgs)` runs a receive's messages; then one delete. */
function loops(work) {
  let stop = false;
  const loop = async () => {
    while (!stop) {
      const res = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: QUEUE_URL,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      const msgs = res.Messages ?? [];
      if (msgs.length === 0) continue;
      await work(msgs);
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: QUEUE_URL,
          Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
        }),
      );
      onDone(msgs.length);
    }
  };
  const all = Array.from({ length: RECEIVERS }, loop);
  return async () => {
    stop = true;
    queue.close();
    await Promise.all(all);
  };
}

/** The bench's per-message shape: a receive's groups in parallel, one group's messages in turn. */
const byGroups = (one) => async (msgs) => {
  const byGroup = new Map();
  for (const m of msgs) {
    const g = m.Attributes.MessageGroupId;
    if (!byGroup.has(g)) byGroup.set(g, []);
    byGroup.get(g).push(m);
  }
  await Promise.all(
    [...byGroup.values()].map(async (list) => {
      for (const m of list) await one(m);
    }),
  );
};

const row = (m) => [
  m.MessageAttributes['message-id'].StringValue,
  m.Attributes.MessageGroupId,
  JSON.parse(m.Body).n,
];

let stop;
if (VARIANT === 'floor-msg') {
  stop = loops(byGroups((m) => floorOne(pool, SCHEMA, 'floor', row(m)[0], (q) => effect(q, row(m)))));
} else if (VARIANT === 'floor-batch') {
  stop = loops((msgs) =>
    floorBatch(
      pool,
      SCHEMA,
      'floor',
      msgs,
      (m) => row(m)[0],
      (q, m) => effect(q, row(m)),
    ),
  );
} else if (VARIANT.startsWith('inbox')) {
  const { createInbox } = await import('@once/core');
  const inbox = createInbox({
    pool,
    schema: SCHEMA,
    consumer: NAME,
    handler: async (e, { tx, id }) => {
      await effect(tx, [id, e.key, JSON.parse(e.body.toString()).n]);
    },
  });
  await inbox.ready();
  // The listener the bench (and the once variants here) hang on it, so its events cost alike.
  inbox.on('message:processed', () => {});
  // The least an adapter must hand core: id, body, the group as key and source.
  const envelope = (m) => {
    const group = m.Attributes.MessageGroupId;
    return {
      id: m.MessageAttributes['message-id'].StringValue,
      body: Buffer.from(m.Body),
      headers: {},
      key: group,
      source: { broker: 'sqs', queue: QUEUE_URL, group },
      attempt: 1,
      redelivered: false,
    };
  };
  const check = (o) => {
    if (o.status !== 'processed') throw new Error(`unexpected ${o.status}`);
  };
  stop = batch
    ? loops(async (msgs) => (await inbox.processBatch(msgs.map(envelope))).forEach(check))
    : loops(byGroups(async (m) => check(await inbox.process(envelope(m)))));
} else {
  const { createSqsConsumer } = await import(env.PROFILE_BUILD ?? '@once/sqs');
  const consumer = createSqsConsumer({
    client: sqs,
    queueUrl: QUEUE_URL,
    pool,
    schema: SCHEMA,
    consumer: `bench-${QUEUE_URL}`,
    batch,
    deadLetterQueueUrl: false,
    receivers: ONCE_RECEIVERS,
    maxInFlight: MAX_IN_FLIGHT,
    ...(env.BENCH_SQS_LINGER_MS ? { settleLingerMs: Number(env.BENCH_SQS_LINGER_MS) } : {}),
    concurrency: CONCURRENCY,
    waitTimeSeconds: 1,
    handler: async (e, { tx, id }) => {
      await effect(tx, [id, e.key, JSON.parse(e.body.toString()).n]);
    },
  });
  consumer.inbox.on('message:processed', () => onDone());
  for (const e of ['message:duplicate', 'message:retry', 'message:not-run', 'message:busy', 'message:failed'])
    consumer.inbox.on(e, () => {
      throw new Error(`fake-sqs: unexpected ${e}`);
    });
  await consumer.start();
  stop = async () => {
    queue.close();
    await consumer.stop();
  };
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
counting = true;
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
counting = false;
if (session) {
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(env.PROFILE_OUT, JSON.stringify(profile));
  session.disconnect();
}
obs.disconnect();
await stop();
const perMsg = (x) => Number((x / N).toFixed(4));
const sqsCalls = Object.values(calls).reduce((a, b) => a + b, 0);
console.log(
  JSON.stringify({
    variant: VARIANT,
    mode: MODE,
    n: N,
    msgsPerSec: Math.round(N / secs),
    cpuUsPerMsg: Number(((cpu.user + cpu.system) / N).toFixed(2)),
    userUsPerMsg: Number((cpu.user / N).toFixed(2)),
    systemUsPerMsg: Number((cpu.system / N).toFixed(2)),
    mainThreadUsPerMsg: threads1 ? Number(((threads1.main - threads0.main) / 1000 / N).toFixed(2)) : null,
    otherThreadsUsPerMsg: threads1 ? Number(((threads1.other - threads0.other) / 1000 / N).toFixed(2)) : null,
    scavengesPer1k: Number(((gcs * 1000) / N).toFixed(2)),
    sqsCallsPerMsg: perMsg(sqsCalls),
    callsPerMsg: Object.fromEntries(Object.entries(calls).map(([k, v]) => [k, perMsg(v)])),
    entriesPerCall: Object.fromEntries(
      Object.entries(entries).map(([k, v]) => [k, Number((v / calls[k]).toFixed(2))]),
    ),
    emptyReceives,
    visibilityZero,
  }),
);
process.exit(0);
