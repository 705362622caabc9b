// Where a relay round's time goes: claim (with the per-key check), publish, mark sent, commit.
// Drains BENCH_ROWS rows (BENCH_KEYS keys, 0 = no keys) with one relay, `runOnce()` in a loop,
// timing each statement and each publish call. BENCH_ONLY=null,kafka,rabbitmq,sqs,nats
// ("null" is a publisher that confirms at once: the relay's Postgres cost alone).
import { createOutbox, createRelay, migrate } from '@once/core';
import pg from 'pg';
import { makeTarget } from './targets.mjs';

const ROWS = Number(process.env.BENCH_ROWS ?? 5_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const KEYS = Number(process.env.BENCH_KEYS ?? 1_000);
const ONLY = (process.env.BENCH_ONLY ?? 'null,kafka,rabbitmq,sqs,nats').split(',');
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const RUN = `bench-relay-profile-${process.pid}`;

const raw = new pg.Pool({ connectionString: DB_URL, max: 4 });
raw.on('error', () => {});
const phases = new Map();
const add = (label, ms) => {
  const p = phases.get(label) ?? { n: 0, ms: 0 };
  p.n++;
  p.ms += ms;
  phases.set(label, p);
};
const labelOf = (sql) =>
  /^BEGIN[\s\S]*SELECT o\.seq/.test(sql)
    ? 'begin+claim'
    : /^BEGIN/.test(sql)
      ? 'begin'
      : /^COMMIT/.test(sql)
        ? 'commit'
        : /^SELECT o\.seq/.test(sql)
          ? 'claim'
          : /SET status = 'sent'[\s\S]*COMMIT/.test(sql)
            ? 'mark sent+commit'
            : /SET status = 'sent'/.test(sql)
              ? 'mark sent'
              : sql.slice(0, 20);
const timedClient = (c) => ({
  async query(t, v) {
    const t0 = performance.now();
    try {
      return await c.query(t, v);
    } finally {
      add(labelOf(typeof t === 'string' ? t : t.text), performance.now() - t0);
    }
  },
  release: (e) => c.release(e),
  on: (e, l) => c.on(e, l),
  off: (e, l) => c.off(e, l),
});
const pool = {
  query: (t, v) => raw.query(t, v),
  connect: async () => timedClient(await raw.connect()),
  on: () => {},
};

const out = [];
for (const name of ONLY) {
  const target = await makeTarget(name, RUN);
  const schema = `once_bench_relay_profile_${name}`;
  try {
    await raw.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await migrate(raw, { schema });
    const outbox = createOutbox({ pool: raw, schema, destinations: [target.destination] });
    const c = await raw.connect();
    await c.query('BEGIN');
    for (let i = 0; i < ROWS; i++)
      await outbox.enqueue(c, target.destination, Buffer.from(`{"i":${i}}`), {
        key: KEYS ? `k${i % KEYS}` : undefined,
      });
    await c.query('COMMIT');
    c.release();
    await raw.query(`ANALYZE ${schema}.outbox`);
    const publisher = {
      async publish(m, o) {
        const t0 = performance.now();
        try {
          return await target.publisher.publish(m, o);
        } finally {
          add('publish', performance.now() - t0);
        }
      },
    };
    const relay = createRelay({
      pool,
      schema,
      publishers: { [target.destination]: publisher },
      batchSize: BATCH,
      listen: false,
    });
    phases.clear();
    let rounds = 0;
    const t0 = performance.now();
    while ((await relay.runOnce()) > 0) rounds++;
    const total = performance.now() - t0;
    const row = { broker: name, rounds, msPerRound: total / rounds, phases: {} };
    let accounted = 0;
    for (const [label, p] of phases) {
      row.phases[label] = p.ms / rounds;
      accounted += p.ms;
    }
    row.phases.other = (total - accounted) / rounds;
    out.push(row);
    console.log(
      `${name.padEnd(9)} ${rounds} rounds, ${(total / rounds).toFixed(1)} ms/round: ` +
        Object.entries(row.phases)
          .map(([k, v]) => `${k} ${v.toFixed(1)}`)
          .join(', '),
    );
    await raw.query(`DROP SCHEMA ${schema} CASCADE`);
  } finally {
    await target.close();
  }
}
await raw.end();
