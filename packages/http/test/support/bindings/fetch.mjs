// The test application on the Fetch binding. The Fetch binding has no server of its own: here
// node:http carries it through a few lines of conversion written for the test (as Hono's or
// Next's servers would), so that @once/http/node is tested on its own in node.mjs.
import { createServer } from 'node:http';
import { idempotentFetch } from '@once/http/fetch';
import { encode, parseBody, principalOf, steerOf } from '../routes.mjs';

/**
 * Serves `routes` on 127.0.0.1 (port 0 unless given): `POST /charges` and `POST /lease-charges`
 * (idempotent, on `engine` and `leaseEngine`), `POST /accounts/:id/charges`, `POST
 * /after-response` and `POST /swallow` (keyed or not), `POST /naive` (no key). Resolves with
 * `{ port, close, server }`. `onResult` sees every idempotent request's result; `serverOptions`
 * go to `http.createServer`, `timeouts` (`headersTimeout`, `requestTimeout`) onto the server.
 */
export async function listen({
  engine,
  leaseEngine,
  routes,
  port = 0,
  onResult,
  toListener = plainListener,
  serverOptions = {},
  timeouts = {},
}) {
  const inputOf = async (req, ctx) => ({
    principal: principalOf(req.headers),
    key: ctx.key || undefined,
    request: req.headers.get('x-request-id') ?? undefined,
    steer: steerOf(req.headers),
    body: parseBody(new Uint8Array(await req.arrayBuffer())),
  });
  const respond = (result) => {
    const r = encode(result);
    const headers = new Headers();
    for (const [n, v] of r.headers) headers.append(n, v);
    return new Response(r.body, { status: r.status, headers });
  };
  const wrap = (idempotency, route, run, extra = {}) =>
    idempotentFetch(idempotency, {
      route,
      scope: (req) => principalOf(req.headers),
      onResult,
      handler: async (req, ctx) => run(ctx, await inputOf(req, ctx)),
      ...extra,
    });
  const charges = wrap(engine, '/charges', async (ctx, input) => respond(await routes.charge(ctx, input)));
  const leaseCharges = leaseEngine
    ? wrap(leaseEngine, '/lease-charges', async (ctx, input) => respond(await routes.leaseCharge(ctx, input)))
    : undefined;
  // One route for every account: the name is the pattern, the target tells the accounts apart.
  const accountCharges = wrap(engine, '/accounts/:id/charges', async (ctx, input) =>
    respond(await routes.charge(ctx, input)),
  );
  // Answers, then writes two rows after the handler returned (a timer): refused, both of them.
  const afterResponse = wrap(
    engine,
    undefined,
    async (ctx, input) => {
      const answer = await routes.answerFirst(ctx, input);
      setTimeout(() => void routes.writePair(ctx, input), 0);
      return respond(answer);
    },
    { required: false },
  );
  const swallow = wrap(engine, undefined, async (ctx, input) => respond(await routes.swallow(ctx, input)), {
    required: false,
  });
  const handler = async (req) => {
    const path = new URL(req.url).pathname;
    if (req.method === 'POST' && path === '/charges') return charges(req);
    if (req.method === 'POST' && path === '/lease-charges' && leaseCharges) return leaseCharges(req);
    if (req.method === 'POST' && /^\/accounts\/[^/]+\/charges$/.test(path)) return accountCharges(req);
    if (req.method === 'POST' && path === '/after-response') return afterResponse(req);
    if (req.method === 'POST' && path === '/swallow') return swallow(req);
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
  const server = createServer(serverOptions, toListener(held));
  Object.assign(server, timeouts);
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    server,
    port: server.address().port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/**
 * A minimal node:http → Fetch conversion (no @once/http/node), standing in for the server in
 * front of a Fetch handler (Hono's, Next's): a request it cannot convert gets 400, a client that
 * left is let go, a handler that throws gets 500.
 */
function plainListener(handler) {
  return (req, res) => {
    serve().catch(() => {
      if (res.headersSent || res.destroyed) res.destroy();
      else res.writeHead(500, { 'content-length': '0' }).end();
    });
    async function serve() {
      const chunks = [];
      try {
        for await (const c of req) chunks.push(c);
      } catch {
        res.destroy();
        return;
      }
      let request;
      try {
        const headers = new Headers();
        for (const [n, v] of Object.entries(req.headers)) {
          for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined) headers.append(n, one);
        }
        request = new Request(`http://${req.headers.host}${req.url}`, {
          method: req.method,
          headers,
          body: req.method === 'GET' || req.method === 'HEAD' ? null : Buffer.concat(chunks),
        });
      } catch {
        res.writeHead(400, { 'content-length': '0', connection: 'close' }).end();
        return;
      }
      const response = await handler(request);
      const body = Buffer.from(await response.arrayBuffer());
      if (res.destroyed) return;
      const out = {};
      for (const [n, v] of response.headers) if (n !== 'set-cookie') out[n] = v;
      const cookies = response.headers.getSetCookie();
      if (cookies.length) out['set-cookie'] = cookies;
      res.writeHead(response.status, out).end(body);
    }
  };
}
