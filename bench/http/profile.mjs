// Where a request's CPU goes (issue #26, Speed): one variant of bench/http (plain, once or replay)
// driven at c=16 over real HTTP on 127.0.0.1, with V8's CPU profiler on for the measured window
// only (node:inspector), and its self time summed by where the code lives (native, undici, pg,
// @once/http, @once/core, node:http, ...), in µs per request. Sizes: PROFILE_N (default 4000),
// PROFILE_C (default 16). `node bench/http/profile.mjs once` after `npm run build`; compare with
// `plain` on the same machine and the same minute: the load average is printed beside it.
import http from 'node:http';
import { Session } from 'node:inspector/promises';
import os from 'node:os';
import { migrate } from '@once/core';
import { createIdempotency } from '@once/http';
import { idempotentFetch } from '@once/http/fetch';
import { nodeListener } from '@once/http/node';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import { countingPool } from '../support/counting-pool.mjs';

const variant = process.argv[2] ?? 'once';
const N = Number(process.env.PROFILE_N ?? 4000);
const C = Number(process.env.PROFILE_C ?? 16);
const DB_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SCHEMA = `once_bench_http_prof_${process.pid}`;

const raw = new pg.Pool({ connectionString: DB_URL, max: 18 });
raw.on('error', () => {});
const { pool, counter } = countingPool(raw);
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await migrate(raw, { schema: SCHEMA });
await raw.query(
  `CREATE TABLE ${SCHEMA}.effects (variant text NOT NULL, key text NOT NULL, account text NOT NULL, amount int NOT NULL)`,
);
const EFFECT = `INSERT INTO ${SCHEMA}.effects (variant, key, account, amount) VALUES ($1, $2, $3, $4)`;
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
const server = http.createServer(
  nodeListener(async (req) => (new URL(req.url).pathname === '/plain' ? plainRoute(req) : onceRoute(req))),
);
server.keepAliveTimeout = 60_000;
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const client = new HttpPool(`http://127.0.0.1:${server.address().port}`, {
  connections: C,
  pipelining: 1,
  keepAliveTimeout: 60_000,
});

async function drive(path, n, prefix) {
  let next = 0;
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next < n) {
        const i = next++;
        const res = await client.request({
          path,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-account': 'acct',
            'idempotency-key': `"${prefix}-${i}"`,
          },
          body: `{"amount":${i % 100}}`,
        });
        await res.body.arrayBuffer();
        if (res.statusCode !== 201) throw new Error(`request ${i} answered ${res.statusCode}`);
      }
    }),
  );
}

const path = variant === 'plain' ? '/plain' : '/once';
await drive(path, 1000, 'warm');
// A replay run replays the keys of a first run made just before it (outside the window).
if (variant === 'replay') await drive(path, N, 'k');
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 200 });
const load = os.loadavg()[0];
const rt0 = counter.trips;
const cpu0 = process.cpuUsage();
await session.post('Profiler.start');
const t0 = performance.now();
await drive(path, N, 'k');
const ms = performance.now() - t0;
const { profile } = await session.post('Profiler.stop');
const cpu = process.cpuUsage(cpu0);
const trips = (counter.trips - rt0) / N;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
const group = (url, fn) => {
  if (!url) return fn === '(idle)' ? '(idle)' : fn === '(garbage collector)' ? '(gc)' : `native: ${fn}`;
  if (url.includes('/packages/http/')) return '@once/http';
  if (url.includes('/packages/core/')) return '@once/core';
  const m = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (m) return m[1];
  if (url.startsWith('node:'))
    return url
      .replace(/^node:(internal\/)?/, 'node:')
      .split('/')
      .slice(0, 2)
      .join('/');
  return url.split('/').slice(-2).join('/');
};
const groups = new Map();
const fns = new Map();
for (const [id, us] of self) {
  const cf = byId.get(id).callFrame;
  const g = group(cf.url, cf.functionName);
  groups.set(g, (groups.get(g) ?? 0) + us);
  const f = `${cf.functionName || '(anon)'} ${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber}`;
  fns.set(f, (fns.get(f) ?? 0) + us);
}
const busy = [...groups].filter(([g]) => g !== '(idle)').reduce((a, [, us]) => a + us, 0);
console.log(
  `${variant}: ${N} requests at c=${C}, ${(N / (ms / 1000)).toFixed(0)} req/s, ${trips.toFixed(2)} PostgreSQL round trips/req, process CPU ${((cpu.user + cpu.system) / N).toFixed(0)} µs/req, sampled busy ${(busy / N).toFixed(0)} µs/req, load average ${load.toFixed(1)}`,
);
const top = (m, k) =>
  [...m]
    .filter(([g]) => g !== '(idle)')
    .sort((a, b) => b[1] - a[1])
    .slice(0, k)
    .map(([g, us]) => `  ${(us / N).toFixed(1).padStart(7)} µs/req  ${g}`)
    .join('\n');
console.log(top(groups, 22));
console.log('  --- functions');
console.log(top(fns, Number(process.env.PROFILE_TOP ?? 25)));

await client.close();
await new Promise((r) => server.close(r));
await raw.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
await raw.end();
