// NATS JetStream benchmark: @once/nats against a plain @nats-io/jetstream pull consumer doing the
// same work, the same number of messages outstanding.
//   R0  raw consume + ack, no database: the ceiling.
//   B1/msg    plain consumer, one transaction per message (INSERT effect; COMMIT; ack).
//   B1/batch  plain consumer, one transaction per fetched batch, then an ack per message.
//   once/msg  createNatsConsumer, per-message transactions.
//   once/batch createNatsConsumer({ batch: true }).
//   floor/msg, floor/batch  the floor (bench/support/floor.mjs, a frozen hand-written inbox) in
//             B1's consumers: its claim before the effect, ack after COMMIT.
// BENCH_ALT=path: another build of @once/nats (its dist/index.js, kept inside this checkout so its
// own imports resolve) adds once-alt/msg and once-alt/batch, the same consumers from that build, to
// compare two builds of the adapter in one run, paired per repetition.
// Every variant consumes BENCH_MESSAGES messages pre-published to its own file-stored stream.
// Size: BENCH_MESSAGES (default 10000), BENCH_REPS interleaved runs (default 7; per variant the
// median, ratios the median of per-repetition paired ratios with min–max), BENCH_ONLY=name,name,
// BENCH_SCHEMA (default once_bench_nats).
// Streams (bench/support/faults.mjs; BENCH_STREAMS=clean,faults, default both): clean, and faults,
// where 5 % of the messages are published twice and 5 % throw after their effect on the first
// attempt. once redelivers through its retry (nak with its delay); B1 and the floor nak. The
// copies go out after the originals, past a short duplicate window, as JetStream would otherwise
// drop them. Every run checks its effects: each id once (B1, without an inbox: each copy once).

import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { migrate } from '@once/core';
import { createNatsConsumer } from '@once/nats';
import pg from 'pg';
import { countingPool } from '../support/counting-pool.mjs';
import { bareTransaction, checkEffects, faultRun, streamsFromEnv } from '../support/faults.mjs';
import { createFloorTable, floorBatch, floorOne } from '../support/floor.mjs';
import { timeConsumer } from '../support/measure.mjs';
import { ADAPTER_CHECKS, closeBench } from '../support/report.mjs';

const N = Number(process.env.BENCH_MESSAGES ?? 10_000);
const PREFETCH = Number(process.env.BENCH_PREFETCH ?? 200);
const MSG_CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const REPS = Number(process.env.BENCH_REPS ?? 7);
const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = process.env.BENCH_SCHEMA ?? 'once_bench_nats';
const STREAMS = streamsFromEnv();
/** The faults stream's duplicate window, in ms: its copies are published after it has passed. */
const DUP_WINDOW_MS = 100;
const RUN = `bench_nats_${process.pid}`;
const ALT = process.env.BENCH_ALT
  ? await import(pathToFileURL(path.resolve(process.env.BENCH_ALT)).href)
  : undefined;

const raw = new pg.Pool({ connectionString: DB_URL, max: 20 });
raw.on('error', () => {});
const { pool, counter } = countingPool(raw);

await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(raw, { schema: SCHEMA });
await raw.query(
  `CREATE TABLE ${SCHEMA}.effects (variant text NOT NULL, id text NOT NULL, amount int NOT NULL)`,
);
await createFloorTable(raw, SCHEMA);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (variant, id, amount) VALUES ($1, $2, $3)`;

const nc = await connect({ servers: NATS_URL, name: RUN });
const jsm = await jetstreamManager(nc);
const js = jetstream(nc);
const idOf = (m) => m.headers.get('Nats-Msg-Id');
const amountOf = (m) => JSON.parse(new TextDecoder().decode(m.data)).amount;

/** The current run's stream (which ids fail once), its repetition and the redeliveries seen so far. */
let run;
let rep = 0;
let redelivered = 0;
/** The effect every variant writes, then the stream's transient failure (so it rolls back). */
async function effect(q, stream, id, amount) {
  await q.query(EFFECT, [stream, id, amount]);
  run.fail(id);
}

async function fill(stream) {
  const copies = run.published > run.distinct;
  await jsm.streams.add({
    name: stream,
    subjects: [`${stream}.in`],
    ...(copies ? { duplicate_window: DUP_WINDOW_MS * 1e6 } : {}),
  });
  const send = async (ks) => {
    for (let i = 0; i < ks.length; i += 500) {
      const acks = ks.slice(i, i + 500).map((k) => {
        const body = JSON.stringify({ id: `m-${k}`, amount: k % 100 });
        return js.publish(`${stream}.in`, body, { msgID: `m-${k}` });
      });
      const got = await Promise.all(acks);
      if (got.some((a) => a.duplicate)) throw new Error(`${stream}: JetStream dropped a copy`);
    }
  };
  const seen = new Set();
  const firsts = [];
  const again = [];
  for (const k of run.order) {
    (seen.has(k) ? again : firsts).push(k);
    seen.add(k);
  }
  await send(firsts);
  if (again.length > 0) {
    await new Promise((r) => setTimeout(r, DUP_WINDOW_MS * 2));
    await send(again);
  }
}

/** The durable a plain variant reads (once's variants create their own). */
async function plainConsumer(stream) {
  await jsm.consumers.add(stream, {
    durable_name: 'plain',
    ack_policy: AckPolicy.Explicit,
    ack_wait: 60_000 * 1e6,
    max_ack_pending: 1_000,
  });
  return js.consumers.get(stream, 'plain');
}

/**
 * Times `consume` on `mode` until it reports every published message done (acked after its
 * COMMIT; a failed attempt is not done), checks the effects; returns the measurements.
 */
async function measure(name, stream, consume, mode) {
  run = faultRun(mode, N, (k) => `m-${k}`);
  redelivered = 0;
  await fill(stream);
  const label = `${name} (${mode.mode} stream, repetition ${rep + 1} of ${REPS})`;
  const r = await timeConsumer({ name, n: run.published, counter, consume, label });
  await jsm.streams.delete(stream).catch(() => {});
  if (name !== 'R0 raw') {
    const { rows } = await raw.query(
      `SELECT count(*)::int AS n, count(DISTINCT id)::int AS d FROM ${SCHEMA}.effects WHERE variant = $1`,
      [stream],
    );
    checkEffects({
      variant: name,
      stream: mode,
      rows: rows[0].n,
      ids: rows[0].d,
      run,
      dedup: !name.startsWith('B1'),
    });
  }
  return { ...r, redelivered };
}

/** A transient failure: nak, the plain consumers' redelivery. Anything else is a bug. */
function nak(ms, err) {
  if (!String(err?.message).startsWith('bench:')) throw err;
  for (const m of ms) m.nak();
  redelivered += ms.length;
}

/** B1/msg's consumer: `consume()` with PREFETCH outstanding, MSG_CONCURRENCY `work(m)` at once, ack after each. */
async function perMessage(stream, onDone, work) {
  const c = await plainConsumer(stream);
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
        .catch((err) => nak([m], err))
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

/** B1/batch's consumer: fetch up to BATCH, `work(take)` in one transaction, ack each. */
async function batched(stream, onDone, work) {
  const c = await plainConsumer(stream);
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const take = [];
      for await (const m of await c.fetch({ max_messages: BATCH, expires: 1_000 })) take.push(m);
      if (take.length === 0) continue;
      try {
        await work(take);
      } catch (err) {
        nak(take, err);
        continue;
      }
      for (const m of take) {
        m.ack();
        onDone();
      }
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

const variants = {
  R0: (stream, mode) =>
    measure(
      'R0 raw',
      stream,
      async (onDone) => {
        const c = await plainConsumer(stream);
        const messages = await c.consume({ max_messages: PREFETCH });
        void (async () => {
          for await (const m of messages) {
            m.ack();
            onDone();
          }
        })();
        return () => messages.close();
      },
      mode,
    ),
  'B1/msg': (stream, mode) =>
    measure(
      'B1/msg',
      stream,
      (onDone) =>
        perMessage(stream, onDone, (m) =>
          bareTransaction(pool, (c) => effect(c, stream, idOf(m), amountOf(m))),
        ),
      mode,
    ),
  'B1/batch': (stream, mode) =>
    measure(
      'B1/batch',
      stream,
      (onDone) =>
        batched(stream, onDone, (take) =>
          bareTransaction(pool, async (c) => {
            for (const m of take) await effect(c, stream, idOf(m), amountOf(m));
          }),
        ),
      mode,
    ),
  'floor/msg': (stream, mode) =>
    measure(
      'floor/msg',
      stream,
      (onDone) =>
        perMessage(stream, onDone, (m) =>
          floorOne(pool, SCHEMA, stream, idOf(m), (q) => effect(q, stream, idOf(m), amountOf(m))),
        ),
      mode,
    ),
  'floor/batch': (stream, mode) =>
    measure(
      'floor/batch',
      stream,
      (onDone) =>
        batched(stream, onDone, (take) =>
          floorBatch(pool, SCHEMA, stream, take, idOf, (q, m) => effect(q, stream, idOf(m), amountOf(m))),
        ),
      mode,
    ),
  'once/msg': (stream, mode) => onceVariant('once/msg', stream, false, mode),
  'once/batch': (stream, mode) => onceVariant('once/batch', stream, true, mode),
  ...(ALT
    ? {
        'once-alt/msg': (stream, mode) =>
          onceVariant('once-alt/msg', stream, false, mode, ALT.createNatsConsumer),
        'once-alt/batch': (stream, mode) =>
          onceVariant('once-alt/batch', stream, true, mode, ALT.createNatsConsumer),
      }
    : {}),
};

function onceVariant(name, stream, batch, mode, create = createNatsConsumer) {
  return measure(
    name,
    stream,
    async (onDone) => {
      const consumer = create({
        connection: nc,
        subject: `${stream}.in`,
        stream,
        durable: 'once',
        consumer: stream,
        deadLetterSubject: false,
        pool,
        schema: SCHEMA,
        // The same outstanding window as the plain variants: PREFETCH in all.
        concurrency: batch ? 1 : MSG_CONCURRENCY,
        batch,
        batchSize: batch ? BATCH : Math.max(1, Math.round(PREFETCH / MSG_CONCURRENCY)),
        logger: false,
        handler: async (e, { tx }) => {
          await effect(tx, stream, e.id, JSON.parse(e.body.toString()).amount);
        },
      });
      // Done once settled after COMMIT (processed, or a duplicate skipped); anything else comes back.
      consumer.on('settled', (e) => {
        if (e.status === 'processed' || e.status === 'duplicate') onDone();
        else redelivered++;
      });
      await consumer.start();
      return () => consumer.stop();
    },
    mode,
  );
}

console.log(
  `NATS JetStream bench: ${N} messages per variant (file store), ${PREFETCH} outstanding, per-message concurrency ${MSG_CONCURRENCY}, batch ${BATCH}, ${REPS} interleaved repetitions`,
);
const only = process.env.BENCH_ONLY?.split(',');
const names = Object.keys(variants).filter((n) => !only || only.includes(n));
const streams = [];
for (const mode of STREAMS) {
  const runs = Object.fromEntries(names.map((n) => [n, []]));
  console.log(`\n${mode.mode} stream`);
  // Repetitions interleave the variants in a rotating order, so a noisy neighbour slows all alike.
  for (rep = 0; rep < REPS; rep++) {
    const order = names.slice(rep % names.length).concat(names.slice(0, rep % names.length));
    for (const name of order)
      runs[name].push(await variants[name](`${RUN}_${mode.mode}_${name.replace(/\W/g, '_')}_${rep}`, mode));
  }
  streams.push({ ...mode, runs });
}
closeBench({
  streams,
  reps: REPS,
  checks: ALT
    ? [
        ...ADAPTER_CHECKS,
        ['once/msg ÷ once-alt/msg', 'once/msg', 'once-alt/msg', 'rate', undefined, '≥'],
        ['once/batch ÷ once-alt/batch', 'once/batch', 'once-alt/batch', 'rate', undefined, '≥'],
        ['once/batch ÷ once-alt/batch, CPU µs/msg', 'once/batch', 'once-alt/batch', 'cpu', undefined, '≤'],
        ['once-alt/batch ÷ floor/batch', 'once-alt/batch', 'floor/batch', 'rate', undefined, '≥'],
        ['once-alt/batch ÷ once-alt/msg', 'once-alt/batch', 'once-alt/msg', 'rate', undefined, '≥'],
      ]
    : ADAPTER_CHECKS,
  file: new URL('../results/nats.json', import.meta.url),
  meta: { messages: N, reps: REPS, prefetch: PREFETCH, concurrency: MSG_CONCURRENCY, batch: BATCH },
});
const dupes = await raw.query(
  `SELECT variant, count(*)::int AS n FROM (SELECT variant, id FROM ${SCHEMA}.effects GROUP BY 1, 2 HAVING count(*) > 1) d WHERE variant NOT LIKE '%_faults_B1_%' GROUP BY 1`,
);
if (dupes.rows.length > 0) console.log('  duplicate effects:', dupes.rows);

await nc.close();
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await raw.end();
