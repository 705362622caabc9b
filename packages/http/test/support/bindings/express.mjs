// The test application on the Express binding (@once/http/express), for the in-process tests and
// the two-server crash tests (server.mjs). Same routes as fetch.mjs, plus routes that stream
// (res.write, a pipe, flushHeaders), which an idempotent route must refuse, and one without a
// body parser (the middleware reads the body itself).
import { Readable } from 'node:stream';
import { expressIdempotency, keepRawBody } from '@once/http/express';
import express from 'express';
import { encode, principalOf, steerOf } from '../routes.mjs';

/** Serves `routes` on 127.0.0.1 (port 0 unless given); resolves with `{ port, close }`. */
export async function listen({ engine, leaseEngine, routes, port = 0, onResult }) {
  const app = express();
  const scope = (req) => principalOf(req.headers);
  const idempotent = expressIdempotency({ idempotency: engine, scope, onResult });
  const json = express.json({ verify: keepRawBody });
  const inputOf = (req) => ({
    principal: principalOf(req.headers),
    key: req.idempotent?.key ?? req.headers['idempotency-key'],
    steer: steerOf(req.headers),
    body: Buffer.isBuffer(req.body) ? {} : (req.body ?? {}),
  });
  const send = (res, result) => {
    const r = encode(result);
    res.status(r.status);
    for (const [n, v] of r.headers) res.append(n, v);
    res.send(r.body);
  };
  app.post('/charges', json, idempotent(), async (req, res) =>
    send(res, await routes.charge(req.idempotent, inputOf(req))),
  );
  app.post('/unparsed', idempotent(), async (req, res) => {
    const input = inputOf(req);
    input.body = { length: req.body.length };
    send(res, await routes.charge(req.idempotent, input));
  });
  app.post('/throw-404', json, idempotent(), async (req) => {
    await routes.charge(req.idempotent, inputOf(req));
    throw Object.assign(new Error('no such thing'), { status: 404 });
  });
  // A parser without keepRawBody: the bytes are gone before the middleware.
  app.post('/no-raw', express.json(), idempotent(), async (req, res) =>
    send(res, await routes.charge(req.idempotent, inputOf(req))),
  );
  const small = expressIdempotency({ idempotency: engine, scope, onResult, bodyLimitBytes: 16 });
  app.post('/small', small(), async (req, res) =>
    send(res, await routes.charge(req.idempotent, inputOf(req))),
  );
  // Node's own API: writeHead is recorded, end is held back until COMMIT.
  app.post('/write-head', json, idempotent(), async (req, res) => {
    const { json: charge } = await routes.charge(req.idempotent, inputOf(req));
    res.writeHead(201, 'Made', ['content-type', 'text/plain', 'x-raw', 'a', 'x-raw', 'b']);
    res.end(`charge ${charge.charge}`, 'utf8');
  });
  app.post('/stream', json, idempotent(), async (req, res) => {
    await routes.charge(req.idempotent, inputOf(req));
    res.type('text/plain');
    res.write('a');
    res.end('b');
  });
  app.post('/pipe', json, idempotent(), async (req, res) => {
    await routes.charge(req.idempotent, inputOf(req));
    Readable.from(['a', 'b']).pipe(res);
  });
  app.post('/flush', json, idempotent(), async (req, res) => {
    await routes.charge(req.idempotent, inputOf(req));
    res.flushHeaders();
    res.end('late');
  });
  if (leaseEngine) {
    const leased = expressIdempotency({ idempotency: leaseEngine, scope, onResult });
    app.post('/lease-charges', json, leased(), async (req, res) =>
      send(res, await routes.leaseCharge(req.idempotent, inputOf(req))),
    );
  }
  app.post('/naive', json, async (req, res) => send(res, await routes.naive(inputOf(req))));
  // Errors as JSON (Express's own page is HTML).
  app.use((err, _req, res, _next) => {
    res.status(err.status ?? 500).json({ error: err.message, code: err.code });
  });
  const server = await new Promise((resolve) => {
    const s = app.listen(port, '127.0.0.1', () => resolve(s));
  });
  return {
    port: server.address().port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
