// The test application on the Fetch binding, served by node:http through @once/http/node (the
// Fetch binding has no server of its own). `node.mjs` differs only in being the node entry.
import { createServer } from 'node:http';
import { idempotentFetch } from '@once/http/fetch';
import { nodeListener } from '@once/http/node';
import { encode, parseBody, principalOf, steerOf } from '../routes.mjs';

/**
 * Serves `routes` on 127.0.0.1 (port 0 unless given): `POST /charges` and `POST /lease-charges`
 * (idempotent, on `engine` and `leaseEngine`), `POST /naive` (no key). Resolves with
 * `{ port, close }`. `onResult` sees every idempotent request's result.
 */
export async function listen({ engine, leaseEngine, routes, port = 0, onResult }) {
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
  const server = createServer(nodeListener(handler));
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
