// Where a batched NATS run's time goes, per batch: runs bench/nats/run.mjs (same env variables;
// meant for BENCH_ONLY=floor/batch,once/batch) with two probes patched in, and after each variant's
// line prints medians over its batches:
//   pull     a fetch() from its call until its iterator closed (round trip and delivery);
//   work     the batch's transaction: once's Inbox.processBatch; the floor's time from the end of
//            its fetch to its next fetch (its transaction and its acks);
//   between  time from one batch's work ending to the next one's starting: what the consumer does
//            not overlap with its transactions (the floor's is its pull).
// The probes patch @nats-io/jetstream's pull consumer prototype (fetch) and each once consumer's
// inbox; they cost a few timestamps per batch. A diagnostic, not a benchmark: its msgs/s include
// the probes.
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { NatsConsumer } from '@once/nats';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const now = () => performance.now();
/** Every probe record of the run, in order; cut per variant when its result line is printed. */
const events = [];

// The pull consumer class is not exported: take its prototype from a throwaway consumer.
const nc = await connect({ servers: NATS_URL });
const jsm = await jetstreamManager(nc);
const probe = `phases_probe_${process.pid}`;
await jsm.streams.add({ name: probe, subjects: [`${probe}.x`] });
await jsm.consumers.add(probe, { durable_name: 'p', ack_policy: 'explicit' });
const pullConsumer = Object.getPrototypeOf(await jetstream(nc).consumers.get(probe, 'p'));
await jsm.streams.delete(probe);
await nc.close();

const fetch = pullConsumer.fetch;
pullConsumer.fetch = async function (opts) {
  const pull = { kind: 'pull', t0: now(), n: 0 };
  events.push(pull);
  const it = await fetch.call(this, opts);
  const push = it._push.bind(it);
  it._push = (v) => {
    if (typeof v !== 'function') pull.n++;
    push(v);
  };
  it.closed().then(() => {
    pull.end = now();
  });
  return it;
};

const start = NatsConsumer.prototype.start;
NatsConsumer.prototype.start = function () {
  const inbox = this.inbox;
  const processBatch = inbox.processBatch.bind(inbox);
  inbox.processBatch = async (envelopes) => {
    const tx = { kind: 'tx', t0: now(), n: envelopes.length };
    events.push(tx);
    try {
      return await processBatch(envelopes);
    } finally {
      tx.end = now();
    }
  };
  return start.call(this);
};

const median = (a) => {
  const s = a.filter(Number.isFinite).sort((x, y) => x - y);
  return s.length === 0 ? Number.NaN : s[Math.floor(s.length / 2)];
};
const ms = (x) => x.toFixed(1).padStart(6);

function summary(es) {
  const pulls = es.filter((e) => e.kind === 'pull' && e.end !== undefined);
  const full = pulls.filter((p) => p.n > 0);
  const txs = es.filter((e) => e.kind === 'tx' && e.end !== undefined);
  let work;
  let between;
  if (txs.length > 0) {
    work = txs.map((x) => x.end - x.t0);
    between = txs.slice(1).map((x, i) => x.t0 - txs[i].end);
  } else {
    // The floor: fetch, work, ack, fetch again.
    work = pulls.slice(1).map((p, i) => p.t0 - pulls[i].end);
    between = full.map((p) => p.end - p.t0);
  }
  const batches = txs.length || full.length;
  const size = txs.length ? txs.reduce((s, x) => s + x.n, 0) / txs.length : 0;
  return `    per batch, median ms: pull ${ms(median(full.map((p) => p.end - p.t0)))}  work ${ms(median(work))}  between ${ms(median(between))}  (${batches} batches${size ? ` of ${size.toFixed(0)}` : ''}, ${pulls.length} pulls)`;
}

const log = console.log;
let cut = 0;
console.log = (...args) => {
  log(...args);
  const line = String(args[0] ?? '');
  // A variant's result line: "  once/batch   4372 msg/s  ..."
  if (!/^ {2}\S+\s+\d+ msg\/s/.test(line)) return;
  log(summary(events.slice(cut)));
  cut = events.length;
};

await import('./run.mjs');
