// A test server process: `node server.mjs <binding>`, serving routes.mjs through
// bindings/<binding>.mjs on 127.0.0.1 (HTTP_PORT, 0 for any). Prints `{"event":"listening","port":N}`
// when ready. Env: DATABASE_URL, HTTP_SCHEMA (once's tables and the test tables, migrated),
// HTTP_LEASE_MS (lease mode's lease). The tests SIGKILL it at random points and start it again.
// `x-die-after-commit: 1` makes it SIGKILL itself after a first (not replayed) success's COMMIT,
// before the response leaves: onResult runs there in every binding. On the naive route the route
// itself dies after its first effect for the key (routes.mjs).
import { createIdempotency } from '@once/http';
import pg from 'pg';
import { createRoutes, steerOf } from './routes.mjs';

for (const kind of ['unhandledRejection', 'uncaughtException']) {
  process.on(kind, (err) => {
    console.log(JSON.stringify({ event: 'fault', kind, error: String(err?.stack ?? err) }));
  });
}

const binding = process.argv[2];
const schema = process.env.HTTP_SCHEMA;
if (!binding || !schema) throw new Error('usage: HTTP_SCHEMA=... node server.mjs <binding>');
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
pool.on('error', () => {});
const engine = createIdempotency({ pool, schema, consumer: 'http.test', lockTimeoutMs: 500 });
const leaseEngine = createIdempotency({
  pool,
  schema,
  consumer: 'http.lease',
  mode: { lease: { leaseMs: Number(process.env.HTTP_LEASE_MS ?? 2000) } },
});
const { listen } = await import(`./bindings/${binding}.mjs`);
const ms = (name) => (process.env[name] ? Number(process.env[name]) : undefined);
const timeouts = Object.fromEntries(
  [
    ['headersTimeout', ms('HTTP_HEADERS_TIMEOUT_MS')],
    ['requestTimeout', ms('HTTP_REQUEST_TIMEOUT_MS')],
  ].filter(([, v]) => v !== undefined),
);
const check = ms('HTTP_CHECK_INTERVAL_MS');
const server = await listen({
  engine,
  leaseEngine,
  routes: createRoutes({ pool, schema }),
  port: Number(process.env.HTTP_PORT ?? 0),
  serverOptions: check === undefined ? {} : { connectionsCheckingInterval: check },
  timeouts,
  onResult: (result, request) => {
    if (result.status === 'processed' && steerOf(request.headers).dieAfterCommit) {
      process.kill(process.pid, 'SIGKILL');
    }
  },
});
console.log(JSON.stringify({ event: 'listening', port: server.port, pid: process.pid }));
