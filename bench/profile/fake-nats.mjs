// The NATS adapter's own CPU per message, without a NATS server or PostgreSQL: @once/nats's consumer
// over a fake connection and fake-pg.mjs's fake pool, beside the bench's floor consumers
// (bench/nats/run.mjs's perMessage and batched: `consume()` with 200 outstanding, eight at a time,
// and `fetch()` of 100, one transaction per batch) over the same fakes. Only the connection is
// fake: @nats-io/jetstream's own jetstreamManager, consumers.get, fetch/consume iterators
// (PullConsumerMessagesImpl) and JsMsg run as they do against a server, so the library's work per
// message is in every variant alike. The fake server answers the two JetStream API requests made
// at start (account info, consumer info), and answers each pull in one macrotask (one "socket
// read") with real MsgImpl deliveries (the bench's Nats-Msg-Id header and JSON body, a v1 ack
// reply subject), holding at most max_ack_pending (1,000, the bench's) unacked, as the server does.
// inbox-msg, inbox-batch: the floor's consumers calling core's inbox directly (core without the
// adapter): once − inbox is the adapter's own JavaScript.
// Usage: PROFILE_VARIANT=once-msg|once-batch|floor-msg|floor-batch|inbox-msg|inbox-batch
//   PROFILE_N=100000 [PROFILE_WARM=20000] [PROFILE_OUT=x.cpuprofile]
//   [PROFILE_BUILD=<a copy of @once/nats's dist/index.js, inside this checkout>]
//   node bench/profile/fake-nats.mjs
// (FAKE_VARIANT, FAKE_N, FAKE_WARM are accepted too.) bench/profile/instructions.sh counts its
// instructions per message.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import path from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { jetstream } from '@nats-io/jetstream';
import { floorBatch, floorOne } from '../support/floor.mjs';
import { fakePool } from './fake-pg.mjs';
import { threadNs } from './threads.mjs';

// nats-core's internals (the client's own message, headers, iterator and feature classes), as
// @nats-io/jetstream requires them.
const { Features, MsgImpl, QueuedIteratorImpl, deferred, headers, parseSemVer } = createRequire(
  createRequire(import.meta.url).resolve('@nats-io/jetstream'),
)('@nats-io/nats-core/internal');

const env = process.env;
const VARIANT = env.FAKE_VARIANT ?? env.PROFILE_VARIANT ?? 'once-msg';
const N = Number(env.FAKE_N ?? env.PROFILE_N ?? 100_000);
const WARM = Number(env.FAKE_WARM ?? env.PROFILE_WARM ?? 20_000);
const PREFETCH = Number(env.BENCH_PREFETCH ?? 200);
const MSG_CONCURRENCY = Number(env.BENCH_CONCURRENCY ?? 8);
const BATCH = Number(env.BENCH_BATCH ?? 100);
/** The bench's max_ack_pending (plain consumers), once's default (its own). */
const MAX_ACK_PENDING = 1_000;
/** ack_wait the fake reports: long enough that once's working() heartbeat never fires in a run. */
const ACK_WAIT_MS = 3_600_000;
const STREAM = 'fake';
const SUBJECT = `${STREAM}.in`;
const batch = VARIANT.endsWith('batch');
const durable = VARIANT.startsWith('once') ? 'once' : 'plain';
const TOTAL = WARM + N;

const enc = new TextEncoder();
const ACK = 0x2b; // '+' of +ACK, +WPI, +TERM
const json = (v) => ({ data: enc.encode(JSON.stringify(v)) });

/**
 * The stream's messages as the parser hands them to a subscription (`MsgImpl(msg, data)`): the
 * subject and reply as bytes, the header block (Nats-Msg-Id, as the bench publishes with msgID)
 * then the body. Built before the run, like the bytes a socket read would hold.
 */
const wire = [];
const subjectBytes = enc.encode(SUBJECT);
for (let k = 1; k <= TOTAL; k++) {
  const h = headers();
  h.set('Nats-Msg-Id', `m-${k}`);
  const hdr = h.encode();
  const body = enc.encode(JSON.stringify({ id: `m-${k}`, amount: k % 100 }));
  const data = new Uint8Array(hdr.length + body.length);
  data.set(hdr);
  data.set(body, hdr.length);
  // v1 ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ns>.<pending>
  const reply = enc.encode(`$JS.ACK.${STREAM}.${durable}.1.${k}.${k}.1700000000000000000.${TOTAL - k}`);
  wire.push({ ma: { subject: subjectBytes, reply, sid: 1, size: data.length, hdr: hdr.length }, data });
}

/** A NatsConnection as far as @nats-io/jetstream and the adapter use it, over a fake server. */
class FakeConnection {
  info = { version: '2.11.0', jetstream: true, headers: true, proto: 1, max_payload: 1048576 };
  features = new Features(parseSemVer('2.11.0'));
  options = { inboxPrefix: '_INBOX' };
  subs = new Map();
  closeListeners = new Set();
  #closed = deferred();
  #isClosed = false;
  // The server's consumer: next stream sequence, unacked deliveries, pulls waiting to be filled.
  next = 0;
  unacked = 0;
  waiting = [];
  scheduled = false;
  acked = 0;

  async request(subject) {
    if (subject === '$JS.API.INFO') {
      return json({
        type: 'io.nats.jetstream.api.v1.account_info_response',
        memory: 0,
        storage: 0,
        streams: 1,
        consumers: 1,
        limits: {},
        api: { total: 0, errors: 0 },
      });
    }
    if (subject.startsWith('$JS.API.CONSUMER.INFO.')) {
      const name = subject.split('.').pop();
      return json({
        type: 'io.nats.jetstream.api.v1.consumer_info_response',
        stream_name: STREAM,
        name,
        created: '2026-01-01T00:00:00Z',
        config: {
          durable_name: name,
          name,
          ack_policy: 'explicit',
          deliver_policy: 'all',
          max_deliver: -1,
          ack_wait: ACK_WAIT_MS * 1e6,
          max_ack_pending: MAX_ACK_PENDING,
          filter_subject: SUBJECT,
          replay_policy: 'instant',
        },
        delivered: { consumer_seq: 0, stream_seq: 0 },
        ack_floor: { consumer_seq: 0, stream_seq: 0 },
        num_ack_pending: 0,
        num_redelivered: 0,
        num_waiting: 0,
        num_pending: TOTAL,
      });
    }
    throw new Error(`fake: request ${subject}`);
  }

  publish(subject, data, opts) {
    if (subject.charCodeAt(0) === 0x24 && subject.startsWith('$JS.ACK.')) {
      // +ACK and +TERM are final; +WPI is not; a -NAK is not expected in these runs.
      if (data[0] !== ACK) throw new Error('fake: nak');
      if (data[1] === 0x57) return; // +WPI
      this.acked++;
      this.unacked--;
      if (this.waiting.length > 0) this.schedule();
      return;
    }
    if (subject.startsWith('$JS.API.CONSUMER.MSG.NEXT.')) {
      const req = JSON.parse(typeof data === 'string' ? data : new TextDecoder().decode(data));
      this.waiting.push({ inbox: opts.reply, left: req.batch });
      this.schedule();
      return;
    }
    throw new Error(`fake: publish ${subject}`);
  }

  /** Fills waiting pulls in one macrotask (one socket read), within max_ack_pending. */
  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.waiting.length > 0 && this.unacked < MAX_ACK_PENDING && this.next < TOTAL) {
        const pull = this.waiting[0];
        const sub = this.subs.get(pull.inbox);
        if (!sub) {
          this.waiting.shift();
          continue;
        }
        const w = wire[this.next++];
        this.unacked++;
        if (--pull.left === 0) this.waiting.shift();
        sub.callback(null, new MsgImpl(w.ma, w.data, this));
      }
    });
  }

  subscribe(subject, opts) {
    const closed = deferred();
    const sub = {
      callback: opts.callback,
      getSubject: () => subject,
      isDraining: () => false,
      isClosed: () => !this.subs.has(subject),
      closed,
      unsubscribe: () => {
        this.subs.delete(subject);
        closed.resolve();
      },
    };
    this.subs.set(subject, sub);
    return sub;
  }

  status() {
    return new QueuedIteratorImpl();
  }

  addCloseListener(l) {
    this.closeListeners.add(l);
  }

  removeCloseListener(l) {
    this.closeListeners.delete(l);
  }

  closed() {
    return this.#closed;
  }

  isClosed() {
    return this.#isClosed;
  }

  async flush() {}

  async close() {
    this.#isClosed = true;
    this.#closed.resolve();
  }
}

const nc = new FakeConnection();
const js = jetstream(nc);

const { pool } = fakePool();
const fakeQuery = pool.query;
// The schema check: answer it as a current schema.
pool.query = (t) =>
  String(t?.text ?? t).includes('schema_version')
    ? Promise.resolve({ rows: [{ version: 1e9, compatible_from: 0 }], rowCount: 1 })
    : fakeQuery(t);
const EFFECT = 'INSERT INTO effects (variant, id, amount) VALUES ($1, $2, $3)';
const effect = (q, id, amount) => q.query(EFFECT, [STREAM, id, amount]);
// bench/nats/run.mjs's id and amount of a plain consumer's message.
const idOf = (m) => m.headers.get('Nats-Msg-Id');
const amountOf = (m) => JSON.parse(new TextDecoder().decode(m.data)).amount;

let done = 0;
const marks = new Map();
const reached = (k) => new Promise((r) => marks.set(k, r));
const onDone = () => {
  done++;
  marks.get(done)?.();
};
const warmed = reached(WARM);
const finished = reached(TOTAL);

/** bench/nats/run.mjs's perMessage: `consume()` with PREFETCH outstanding, MSG_CONCURRENCY at once. */
async function perMessage(work) {
  const c = await js.consumers.get(STREAM, 'plain');
  const messages = await c.consume({ max_messages: PREFETCH });
  const buffer = [];
  let active = 0;
  const pump = () => {
    while (active < MSG_CONCURRENCY && buffer.length > 0) {
      const m = buffer.shift();
      active++;
      work(m)
        .then(() => {
          m.ack();
          onDone();
        })
        .finally(() => {
          active--;
          pump();
        });
    }
  };
  void (async () => {
    for await (const m of messages) {
      buffer.push(m);
      pump();
    }
  })();
  return () => messages.close();
}

/** bench/nats/run.mjs's batched: fetch up to BATCH, `work(take)` in one transaction, ack each. */
async function batched(work) {
  const c = await js.consumers.get(STREAM, 'plain');
  let stopped = false;
  void (async () => {
    while (!stopped) {
      const take = [];
      for await (const m of await c.fetch({ max_messages: BATCH, expires: 1_000 })) take.push(m);
      if (take.length === 0) continue;
      await work(take);
      for (const m of take) {
        m.ack();
        onDone();
      }
    }
  })();
  // The last fetch waits for messages the fake stream no longer has: not awaited.
  return () => {
    stopped = true;
  };
}

let stop;
if (VARIANT === 'floor-msg') {
  stop = await perMessage((m) =>
    floorOne(pool, 'fake', STREAM, idOf(m), (q) => effect(q, idOf(m), amountOf(m))),
  );
} else if (VARIANT === 'floor-batch') {
  stop = await batched((take) =>
    floorBatch(pool, 'fake', STREAM, take, idOf, (q, m) => effect(q, idOf(m), amountOf(m))),
  );
} else if (VARIANT.startsWith('inbox')) {
  const { createInbox } = await import('@once/core');
  const inbox = createInbox({
    pool,
    schema: 'fake',
    consumer: STREAM,
    handler: async (e, { tx }) => {
      await effect(tx, e.id, JSON.parse(e.body.toString()).amount);
    },
  });
  await inbox.ready();
  const envelope = (m) => ({
    id: idOf(m),
    body: Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength),
    headers: {},
    key: m.subject,
    source: { broker: 'nats', queue: m.subject },
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
  const { createNatsConsumer } = await import(
    env.PROFILE_BUILD ? pathToFileURL(path.resolve(env.PROFILE_BUILD)).href : '@once/nats'
  );
  // bench/nats/run.mjs's onceVariant.
  const consumer = createNatsConsumer({
    connection: nc,
    subject: SUBJECT,
    stream: STREAM,
    durable: 'once',
    consumer: STREAM,
    deadLetterSubject: false,
    pool,
    schema: 'fake',
    concurrency: batch ? 1 : MSG_CONCURRENCY,
    batch,
    batchSize: batch ? BATCH : Math.max(1, Math.round(PREFETCH / MSG_CONCURRENCY)),
    logger: false,
    handler: async (e, { tx }) => {
      await effect(tx, e.id, JSON.parse(e.body.toString()).amount);
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
if (nc.acked < TOTAL) throw new Error(`fake: ${nc.acked} acked of ${TOTAL}`);
// A stop that hangs (once's stop waits for held messages) must not hang the harness.
await Promise.race([stop(), new Promise((r) => setTimeout(r, 1_000).unref())]);
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
