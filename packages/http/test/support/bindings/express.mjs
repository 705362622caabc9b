// The test application on the Express binding (@once/http/express), for the in-process tests and
// the two-server crash tests (server.mjs). Same routes as fetch.mjs, plus routes that stream
// (res.write, a pipe, flushHeaders), which an idempotent route must refuse, and one without a
// body parser (the middleware reads the body itself).
import { createServer } from 'node:http';
import { Readable } from 'node:stream';
import { expressIdempotency, keepRawBody } from '@once/http/express';
import express from 'express';
import { encode, principalOf, steerOf } from '../routes.mjs';

/**
 * Serves `routes` on 127.0.0.1 (port 0 unless given); resolves with `{ port, close, server }`.
 * `serverOptions` go to `http.createServer`, `timeouts` onto the server.
 */
export async function listen({
  engine,
  leaseEngine,
  routes,
  port = 0,
  onResult,
  serverOptions = {},
  timeouts = {},
}) {
  const app = express();
  const scope = (req) => principalOf(req.headers);
  const idempotent = expressIdempotency({ idempotency: engine, scope, onResult });
  const json = express.json({ verify: keepRawBody });
  const inputOf = (req) => ({
    principal: principalOf(req.headers),
    key: req.idempotent?.key || undefined,
    request: req.headers['x-request-id'],
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
  app.post('/accounts/:id/charges', json, idempotent(), async (req, res) =>
    send(res, await routes.charge(req.idempotent, inputOf(req))),
  );
  // The same route in a Router mounted at a prefix: its pattern is /accounts/:id/charges too.
  const api = express.Router();
  api.post('/accounts/:id/charges', json, idempotent(), async (req, res) =>
    send(res, await routes.charge(req.idempotent, inputOf(req))),
  );
  app.use('/api', api);
  // Answers, then writes two rows: refused at the answer (res.end), both of them.
  app.post('/after-response', json, idempotent({ required: false }), async (req, res) => {
    const input = inputOf(req);
    send(res, await routes.answerFirst(req.idempotent, input));
    await routes.writePair(req.idempotent, input);
  });
  app.post('/swallow', json, idempotent({ required: false }), async (req, res) =>
    send(res, await routes.swallow(req.idempotent, inputOf(req))),
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
  app.post('/naive', json, async (req, res) =>
    send(res, await routes.naive({ ...inputOf(req), key: req.headers['idempotency-key'] })),
  );
  // Errors as JSON (Express's own page is HTML).
  app.use((err, _req, res, _next) => {
    res.status(err.status ?? 500).json({ error: err.message, code: err.code });
  });
  const server = createServer(serverOptions, app);
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
