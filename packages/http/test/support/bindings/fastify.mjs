// The test application on the Fastify binding (@once/http/fastify), for the in-process tests and
// the two-server crash tests (server.mjs). Same routes as fetch.mjs, plus routes that stream or
// hijack, which an idempotent route must refuse.
import { createServer } from 'node:http';
import { Readable } from 'node:stream';
import { fastifyIdempotency } from '@once/http/fastify';
import Fastify from 'fastify';
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
  const app = Fastify({
    logger: false,
    serverFactory: (handler) => Object.assign(createServer(serverOptions, handler), timeouts),
  });
  const scope = (request) => principalOf(request.headers);
  const inputOf = (request) => ({
    principal: principalOf(request.headers),
    key: request.idempotent.key || undefined,
    request: request.headers['x-request-id'],
    steer: steerOf(request.headers),
    body: request.body ?? {},
  });
  const send = (reply, result) => {
    const r = encode(result);
    reply.code(r.status);
    const grouped = new Map();
    for (const [n, v] of r.headers) grouped.set(n, [...(grouped.get(n) ?? []), v]);
    for (const [n, vs] of grouped) reply.header(n, vs.length === 1 ? vs[0] : vs);
    return reply.send(r.body);
  };
  const config = { idempotent: true };
  await app.register(async (scoped) => {
    await scoped.register(fastifyIdempotency, { idempotency: engine, scope, onResult });
    scoped.post('/charges', { config }, async (request, reply) =>
      send(reply, await routes.charge(request.idempotent, inputOf(request))),
    );
    scoped.post('/accounts/:id/charges', { config }, async (request, reply) =>
      send(reply, await routes.charge(request.idempotent, inputOf(request))),
    );
    const optional = { idempotent: { required: false } };
    // Answers, then writes two rows before the handler ends: they commit with the key, both.
    scoped.post('/after-response', { config: optional }, async (request, reply) => {
      const input = inputOf(request);
      send(reply, await routes.answerFirst(request.idempotent, input));
      await routes.writePair(request.idempotent, input);
      return reply;
    });
    // Answers and returns, then writes two rows from a timer: after the handler's end, refused.
    scoped.post('/after-return', { config: optional }, async (request, reply) => {
      const input = inputOf(request);
      const ctx = request.idempotent;
      const answer = await routes.answerFirst(ctx, input);
      setTimeout(() => void routes.writePair(ctx, input), 0);
      return send(reply, answer);
    });
    scoped.post('/swallow', { config: optional }, async (request, reply) =>
      send(reply, await routes.swallow(request.idempotent, inputOf(request))),
    );
    // Sends without `return reply`: Fastify sends `undefined` again when the handler resolves.
    scoped.post('/no-return', { config }, async (request, reply) => {
      const r = encode(await routes.charge(request.idempotent, inputOf(request)));
      reply.code(r.status).header('content-type', 'application/json').send(r.body);
    });
    // Sends, then throws: rolled back, and the client gets the error handler's answer.
    scoped.post('/send-then-throw', { config }, async (request, reply) => {
      const r = encode(await routes.charge(request.idempotent, inputOf(request)));
      reply.code(r.status).header('content-type', 'application/json').send(r.body);
      await new Promise((resolve) => setTimeout(resolve, 5));
      throw Object.assign(new Error('thrown after the answer'), { statusCode: 503 });
    });
    scoped.post('/throw-404', { config }, async (request) => {
      await routes.charge(request.idempotent, inputOf(request));
      throw Object.assign(new Error('no such thing'), { statusCode: 404 });
    });
    // Validation runs before the claim: a request that fails it leaves no key behind.
    const schema = {
      body: { type: 'object', required: ['amount'], properties: { amount: { type: 'number' } } },
    };
    scoped.post('/validated', { config, schema }, async (request, reply) =>
      send(reply, await routes.charge(request.idempotent, inputOf(request))),
    );
    // Not idempotent: reading request.idempotent here throws HTTP_NOT_IDEMPOTENT.
    scoped.post('/plain', async (request) => ({ key: request.idempotent.key }));
    scoped.post('/stream', { config }, async (request, reply) => {
      await routes.charge(request.idempotent, inputOf(request));
      return reply.type('text/plain').send(Readable.from(['a', 'b']));
    });
    scoped.post('/hijack', { config }, async (request, reply) => {
      await routes.charge(request.idempotent, inputOf(request));
      reply.hijack();
      reply.raw.end('hijacked');
    });
  });
  if (leaseEngine) {
    await app.register(async (scoped) => {
      await scoped.register(fastifyIdempotency, { idempotency: leaseEngine, scope, onResult });
      scoped.post('/lease-charges', { config }, async (request, reply) =>
        send(reply, await routes.leaseCharge(request.idempotent, inputOf(request))),
      );
    });
  }
  app.post('/naive', async (request, reply) =>
    send(
      reply,
      await routes.naive({
        principal: principalOf(request.headers),
        key: request.headers['idempotency-key'],
        steer: steerOf(request.headers),
        body: request.body ?? {},
      }),
    ),
  );
  await app.listen({ host: '127.0.0.1', port });
  return { server: app.server, port: app.server.address().port, close: () => app.close() };
}
