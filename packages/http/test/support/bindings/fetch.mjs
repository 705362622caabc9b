// The test application on the Fetch binding. The Fetch binding has no server of its own: here
// node:http carries it through a few lines of conversion written for the test (as Hono's or
// Next's servers would), so that @once/http/node is tested on its own in node.mjs.
import { createServer } from 'node:http';
import { idempotentFetch } from '@once/http/fetch';
import { encode, parseBody, principalOf, steerOf } from '../routes.mjs';

/**
 * Serves `routes` on 127.0.0.1 (port 0 unless given): `POST /charges` and `POST /lease-charges`
 * (idempotent, on `engine` and `leaseEngine`), `POST /naive` (no key). Resolves with
 * `{ port, close }`. `onResult` sees every idempotent request's result.
 */
export async function listen({
  engine,
  leaseEngine,
  routes,
  port = 0,
  onResult,
  toListener = plainListener,
}) {
  const wrap = (idempotency, route) =>
    idempotentFetch(idempotency, {
      route,
      scope: (req) => principalOf(req.headers),
      onResult,
      handler: async (req, ctx) => {
        const input = {
          principal: principalOf(req.headers),
          key: ctx.key,
          steer: steerOf(req.headers),
          body: parseBody(new Uint8Array(await req.arrayBuffer())),
        };
        const r = encode(
          await (route === '/charges' ? routes.charge(ctx, input) : routes.leaseCharge(ctx, input)),
        );
        const headers = new Headers();
        for (const [n, v] of r.headers) headers.append(n, v);
        return new Response(r.body, { status: r.status, headers });
      },
    });
  const charges = wrap(engine, '/charges');
  const leaseCharges = leaseEngine ? wrap(leaseEngine, '/lease-charges') : undefined;
  const handler = async (req) => {
    const path = new URL(req.url).pathname;
    if (req.method === 'POST' && path === '/charges') return charges(req);
    if (req.method === 'POST' && path === '/lease-charges' && leaseCharges) return leaseCharges(req);
    if (req.method === 'POST' && path === '/naive') {
      const input = {
        principal: principalOf(req.headers),
        key: req.headers.get('idempotency-key'),
        steer: steerOf(req.headers),
        body: parseBody(new Uint8Array(await req.arrayBuffer())),
      };
      const r = encode(await routes.naive(input));
      return new Response(r.body, { status: r.status, headers: r.headers });
    }
    return new Response('not found', { status: 404 });
  };
  // Crash windows between COMMIT and sending: x-hold-after-commit-ms waits there, so a SIGKILL
  // can land in it; x-die-after-commit makes the process SIGKILL itself there after a first
  // (not replayed) success, so the client's retry must get the replay.
  const held = async (req) => {
    const res = await handler(req);
    const ms = Number(req.headers.get('x-hold-after-commit-ms') ?? 0);
    if (ms > 0) await new Promise((r) => setTimeout(r, ms));
    if (
      req.headers.get('x-die-after-commit') === '1' &&
      new URL(req.url).pathname !== '/naive' &&
      res.ok &&
      !res.headers.has('idempotent-replayed')
    ) {
      process.kill(process.pid, 'SIGKILL');
    }
    return res;
  };
  const server = createServer(toListener(held));
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** A minimal node:http → Fetch conversion (no @once/http/node). */
function plainListener(handler) {
  return async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const headers = new Headers();
    for (const [n, v] of Object.entries(req.headers)) {
      for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined) headers.append(n, one);
    }
    const response = await handler(
      new Request(`http://${req.headers.host}${req.url}`, {
        method: req.method,
        headers,
        body: Buffer.concat(chunks),
      }),
    );
    const body = Buffer.from(await response.arrayBuffer());
    const out = {};
    for (const [n, v] of response.headers) if (n !== 'set-cookie') out[n] = v;
    const cookies = response.headers.getSetCookie();
    if (cookies.length) out['set-cookie'] = cookies;
    res.writeHead(response.status, out).end(body);
  };
}
