// HTTP benchmark (issue #16, item 5; issue #26, Speed): an idempotent route (@once/http's Fetch binding over
// node:http) against the same handler without a key, over real HTTP on 127.0.0.1 with a keep-alive
// client (undici, one connection per client). Every variant is served by the same node:http server
// through the same Fetch adapter (@once/http/node), so only the idempotency layer differs:
//   plain   the handler's effect in an explicit transaction, no key: BEGIN; INSERT effect; COMMIT.
//   floor   a hand-written key row: BEGIN + INSERT INTO floor_http_keys ... ON CONFLICT DO NOTHING
//           (one round trip); INSERT effect; UPDATE the key row with the response; COMMIT. A key
//           that exists answers its stored response. No fingerprint, no in-flight 409, no 4xx rules.
//   once    idempotentFetch: claim, effect, stored response (bytes) in one transaction, answered
//           after COMMIT.
//   replay  once again with the keys of the `once` run just before it: every request a replay.
// Each at c=1 (one client, request after request) and c=16 (16 concurrent clients), every
// request with a new key (but replay). Interleaved repetitions (rotating order); per variant the
// median; ratios the median of per-repetition paired ratios with min–max (bench/support/report.mjs).
// Beside each ratio: the PostgreSQL round trips per request of both sides (medians) and the
// 1-minute load average while its pairs ran (median [min–max] of the repetitions; the machine is
// shared, and a ratio means little without it).
// Size: BENCH_N1 requests per c=1 run (default 400), BENCH_N16 per c=16 run (default 1600),
// BENCH_REPS (default 7), BENCH_ONLY=name,name.
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { migrate } from '@once/core';
import { createIdempotency } from '@once/http';
import { idempotentFetch } from '@once/http/fetch';
import { nodeListener } from '@once/http/node';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import { countingPool } from '../support/counting-pool.mjs';
import { closeBench, median } from '../support/report.mjs';

const N1 = Number(process.env.BENCH_N1 ?? 400);
const N16 = Number(process.env.BENCH_N16 ?? 1600);
const REPS = Number(process.env.BENCH_REPS ?? 7);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = 'once_bench_http';
const ACCOUNT = 'acct_bench';

const raw = new pg.Pool({ connectionString: DB_URL, max: 18 });
raw.on('error', () => {});
const { pool, counter } = countingPool(raw);

await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(raw, { schema: SCHEMA });
await raw.query(
  `CREATE TABLE ${SCHEMA}.effects (variant text NOT NULL, key text NOT NULL, account text NOT NULL, amount int NOT NULL)`,
);
// The floor's key row: the least an idempotency key needs (its scope, the key, the stored answer
// and when it expires).
await raw.query(
  `CREATE TABLE ${SCHEMA}.floor_http_keys (scope text, key text, expires_at timestamptz NOT NULL,
     status int, body bytea, PRIMARY KEY (scope, key))`,
);
await raw.query(`CREATE INDEX ON ${SCHEMA}.floor_http_keys (expires_at)`);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (variant, key, account, amount) VALUES ($1, $2, $3, $4)`;

/** What every variant's handler answers: 201 and a small JSON body. */
const answer = (key, amount) => ({ ok: true, key, amount });

const engine = createIdempotency({ pool, schema: SCHEMA, consumer: 'bench.http', logger: false });
const onceRoute = idempotentFetch(engine, {
  route: 'POST /once',
  scope: (req) => req.headers.get('x-account') ?? '',
  handler: async (req, ctx) => {
    const { amount } = await req.json();
    await ctx.tx.query(EFFECT, ['once', ctx.key, ctx.scope, amount]);
    return Response.json(answer(ctx.key, amount), { status: 201 });
  },
});

/** plain: the same handler's effect in an explicit transaction; the key header is ignored. */
async function plainRoute(req) {
  const { amount } = await req.json();
  const key = req.headers.get('idempotency-key') ?? '';
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query(EFFECT, ['plain', key, req.headers.get('x-account') ?? '', amount]);
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    c.release();
  }
  return Response.json(answer(key, amount), { status: 201 });
}

/** floor: the hand-written key row; a key seen before answers its stored body. */
async function floorRoute(req) {
  const { amount } = await req.json();
  const key = req.headers.get('idempotency-key') ?? '';
  const scope = req.headers.get('x-account') ?? '';
  const c = await pool.connect();
  let stored;
  try {
    const res = await c.query(
      `BEGIN; INSERT INTO ${SCHEMA}.floor_http_keys (scope, key, expires_at) VALUES (${pg.escapeLiteral(scope)}, ${pg.escapeLiteral(key)}, now() + interval '1 day') ON CONFLICT DO NOTHING RETURNING key`,
    );
    if (res[1].rowCount === 1) {
      await c.query(EFFECT, ['floor', key, scope, amount]);
      const body = Buffer.from(JSON.stringify(answer(key, amount)));
      await c.query(
        `UPDATE ${SCHEMA}.floor_http_keys SET status = 201, body = $3 WHERE scope = $1 AND key = $2`,
        [scope, key, body],
      );
      stored = { status: 201, body };
    } else {
      const r = await c.query(
        `SELECT status, body FROM ${SCHEMA}.floor_http_keys WHERE scope = $1 AND key = $2`,
        [scope, key],
      );
      stored = r.rows[0];
    }
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    c.release();
  }
  return new Response(stored.body, {
    status: stored.status,
    headers: { 'content-type': 'application/json' },
  });
}

const routes = { '/plain': plainRoute, '/floor': floorRoute, '/once': onceRoute };
const server = http.createServer(
  nodeListener(async (req) => {
    const route = routes[new URL(req.url).pathname];
    return route ? route(req) : new Response(null, { status: 404 });
  }),
);
server.keepAliveTimeout = 60_000;
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const origin = `http://127.0.0.1:${server.address().port}`;
// One keep-alive connection per client.
const client = new HttpPool(origin, { connections: 16, pipelining: 1, keepAliveTimeout: 60_000 });

/**
 * Sends `n` requests from `c` clients to `path`, with keys `${prefix}-${i}`; every answer must be
 * a 201 (and, for replays, marked as one). Returns the run's measurements.
 */
async function drive(name, path, c, n, prefix, replay = false) {
  if (global.gc) global.gc();
  const load0 = os.loadavg()[0];
  const rt0 = counter.trips;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  let replays = 0;
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (next < n) {
        const i = next++;
        const res = await client.request({
          path,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-account': ACCOUNT,
            'idempotency-key': `"${prefix}-${i}"`,
          },
          body: `{"amount":${i % 100}}`,
        });
        await res.body.arrayBuffer();
        if (res.statusCode !== 201) throw new Error(`${name}: request ${i} answered ${res.statusCode}`);
        if (res.headers['idempotent-replayed']) replays++;
      }
    }),
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  if (replay && replays !== n) throw new Error(`${name}: ${replays} of ${n} answers were replays`);
  if (!replay && replays !== 0) throw new Error(`${name}: ${replays} first requests were replays`);
  const r = {
    variant: name,
    msgsPerSec: n / (ms / 1000),
    roundTripsPerMsg: (counter.trips - rt0) / n,
    cpuUsPerMsg: (cpu.user + cpu.system) / n,
    rssMiB: process.memoryUsage().rss / 2 ** 20,
    loadavg: (load0 + os.loadavg()[0]) / 2,
  };
  console.log(
    `  ${name.padEnd(11)} ${r.msgsPerSec.toFixed(0).padStart(7)} req/s  ${r.roundTripsPerMsg.toFixed(2)} rt/req  ${r.cpuUsPerMsg.toFixed(0)} µs cpu/req  load ${r.loadavg.toFixed(1)}`,
  );
  return r;
}

/** Each variant's run in repetition `rep`; `replay/*` re-sends the keys of the same rep's `once/*`. */
const variants = {
  'plain/c1': (rep) => drive('plain/c1', '/plain', 1, N1, `p1-${rep}`),
  'floor/c1': (rep) => drive('floor/c1', '/floor', 1, N1, `f1-${rep}`),
  'once/c1': (rep) => drive('once/c1', '/once', 1, N1, `o1-${rep}`),
  'plain/c16': (rep) => drive('plain/c16', '/plain', 16, N16, `p16-${rep}`),
  'floor/c16': (rep) => drive('floor/c16', '/floor', 16, N16, `f16-${rep}`),
  'once/c16': (rep) => drive('once/c16', '/once', 16, N16, `o16-${rep}`),
};
const replays = {
  'replay/c1': (rep) => drive('replay/c1', '/once', 1, N1, `o1-${rep}`, true),
  'replay/c16': (rep) => drive('replay/c16', '/once', 16, N16, `o16-${rep}`, true),
};
const replayOf = { 'once/c1': 'replay/c1', 'once/c16': 'replay/c16' };

const CHECKS = [
  ['once/c1 ÷ plain/c1', 'once/c1', 'plain/c1', 'rate', 0.8, '≥'],
  ['once/c16 ÷ plain/c16', 'once/c16', 'plain/c16', 'rate', 0.8, '≥'],
  ['once/c1 ÷ floor/c1', 'once/c1', 'floor/c1', 'rate', 0.95, '≥'],
  ['once/c16 ÷ floor/c16', 'once/c16', 'floor/c16', 'rate', 0.95, '≥'],
  ['replay/c1 ÷ once/c1 (first request)', 'replay/c1', 'once/c1', 'rate', 2, '≥'],
  ['replay/c16 ÷ once/c16 (first request)', 'replay/c16', 'once/c16', 'rate', 2, '≥'],
  ['floor/c1 ÷ plain/c1', 'floor/c1', 'plain/c1', 'rate', undefined, '≥'],
  ['floor/c16 ÷ plain/c16', 'floor/c16', 'plain/c16', 'rate', undefined, '≥'],
  ['once/c1 ÷ plain/c1, CPU µs/req', 'once/c1', 'plain/c1', 'cpu', undefined, '≤'],
  ['once/c16 ÷ plain/c16, CPU µs/req', 'once/c16', 'plain/c16', 'cpu', undefined, '≤'],
];

console.log(
  `HTTP bench: node:http + @once/http/node on 127.0.0.1, undici keep-alive client; ${N1} requests per c=1 run, ${N16} per c=16 run, ${REPS} interleaved repetitions (server, client and both pools in one process; "msg" below is a request)`,
);
// Warm-up: JIT, connections, the pool.
await drive('warm-up', '/plain', 16, 500, 'w-p');
await drive('warm-up', '/floor', 16, 500, 'w-f');
await drive('warm-up', '/once', 16, 500, 'w-o');

const only = process.env.BENCH_ONLY?.split(',');
const names = Object.keys(variants).filter((n) => !only || only.includes(n));
const runs = Object.fromEntries(
  [...names, ...names.filter((n) => replayOf[n]).map((n) => replayOf[n])].map((n) => [n, []]),
);
for (let rep = 0; rep < REPS; rep++) {
  const order = names.slice(rep % names.length).concat(names.slice(0, rep % names.length));
  for (const name of order) {
    runs[name].push(await variants[name](rep));
    // The replay right after its first run, so the pair sees the same neighbours.
    const r = replayOf[name];
    if (r) runs[r].push(await replays[r](rep));
  }
}
const resultsFile = new URL('../results/http.json', import.meta.url);
closeBench({
  runs,
  reps: REPS,
  checks: CHECKS,
  file: resultsFile,
  meta: { requestsC1: N1, requestsC16: N16, reps: REPS, concurrency: [1, 16] },
});
// Round trips and load beside each ratio, printed and added to the results file.
const saved = JSON.parse(readFileSync(resultsFile, 'utf8'));
console.log(
  '\n  ratio                                  rt/req (a ÷ b)   load average while paired, median [min–max]',
);
for (const [label, a, b] of CHECKS) {
  const n = Math.min(runs[a]?.length ?? 0, runs[b]?.length ?? 0);
  if (n === 0) continue;
  const loads = Array.from({ length: n }, (_, i) => (runs[a][i].loadavg + runs[b][i].loadavg) / 2);
  const rt = (v) => median(runs[v].map((r) => r.roundTripsPerMsg));
  const load = { median: median(loads), min: Math.min(...loads), max: Math.max(...loads) };
  const trips = `${rt(a).toFixed(2)} ÷ ${rt(b).toFixed(2)}`;
  console.log(
    `  ${label.padEnd(38)} ${trips.padEnd(16)} ${load.median.toFixed(1)} [${load.min.toFixed(1)}–${load.max.toFixed(1)}]`,
  );
  if (saved.ratios[label]) Object.assign(saved.ratios[label], { roundTrips: [rt(a), rt(b)], loadavg: load });
}
writeFileSync(resultsFile, `${JSON.stringify(saved, null, 2)}\n`);

const dupes = await raw.query(
  `SELECT variant, count(*)::int AS n FROM (SELECT variant, key FROM ${SCHEMA}.effects GROUP BY 1, 2 HAVING count(*) > 1) d GROUP BY 1`,
);
if (dupes.rows.length > 0) console.log('  duplicate effects:', dupes.rows);

await client.close();
await new Promise((r) => server.close(r));
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await raw.end();
