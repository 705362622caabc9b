import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import express from 'express';
import Fastify from 'fastify';
import type { Idempotency } from '../../src/index.js';
import { expressIdempotency, keepRawBody } from '../../src/express.js';
import { fastifyIdempotency } from '../../src/fastify.js';
import type { IdempotentContext } from '../../src/types.js';

/** The two bindings these tests cover. */
export const BINDINGS = ['fastify', 'express'] as const;
export type Binding = (typeof BINDINGS)[number];

/** What the test routes do in their transaction; the ledger row is the effect the tests count. */
export interface TestRoutes {
  /** Records one effect for the request in its transaction (`tx`), e.g. a ledger row. */
  effect(ctx: IdempotentContext, body: unknown): Promise<void>;
  /** A statement that makes COMMIT fail (a deferred constraint), run by `/deferred`. */
  breakCommit(ctx: IdempotentContext): Promise<void>;
}

/** A server listening on 127.0.0.1 at an ephemeral port. */
export interface TestServer {
  readonly url: string;
  close(): Promise<void>;
}

// The handlers' answers carry a random part, so a replay is seen to be the stored bytes and not
// a second run that happens to answer alike.
function chargeBody(key: string, body: unknown): string {
  return JSON.stringify({ id: randomUUID(), key, received: body });
}

const principal = (h: string | string[] | undefined): string => (typeof h === 'string' && h !== '' ? h : 'anonymous');

/**
 * Starts `binding`'s app with these routes, all idempotent:
 * - `POST /charges`: effect, then 201 JSON with a random id and a `set-cookie` pair;
 * - `POST /status/:code`: effect, then answers `code` (4xx/5xx cases);
 * - `POST /throw`: effect, then throws;
 * - `POST /deferred`: effect and a deferred-constraint violation, then 201;
 * - `POST /stream`, `/pipe`, `/flush` (Express) and `/stream` (Fastify): effect, then a streamed body;
 * - `POST /slow`: effect, sleeps 300 ms in the transaction, then 201.
 * The scope is the `x-principal` request header.
 */
export async function startApp(binding: Binding, idempotency: Idempotency, routes: TestRoutes): Promise<TestServer> {
  return binding === 'fastify' ? startFastify(idempotency, routes) : startExpress(idempotency, routes);
}

async function startFastify(idempotency: Idempotency, routes: TestRoutes): Promise<TestServer> {
  const app = Fastify({ logger: false });
  await app.register(fastifyIdempotency, { idempotency, scope: (request) => principal(request.headers['x-principal']) });
  const config = { idempotent: true };
  app.post('/charges', { config }, async (request, reply) => {
    await routes.effect(request.idempotent, request.body);
    reply.header('set-cookie', ['a=1', 'b=2']).code(201).type('application/json');
    return chargeBody(request.idempotent.key, request.body);
  });
  app.post<{ Params: { code: string } }>('/status/:code', { config }, async (request, reply) => {
    await routes.effect(request.idempotent, request.body);
    return reply.code(Number(request.params.code)).send({ status: Number(request.params.code), id: randomUUID() });
  });
  app.post('/throw', { config }, async (request) => {
    await routes.effect(request.idempotent, request.body);
    throw new Error('handler failed on purpose');
  });
  app.post('/deferred', { config }, async (request, reply) => {
    await routes.effect(request.idempotent, request.body);
    await routes.breakCommit(request.idempotent);
    return reply.code(201).send({ ok: true });
  });
  app.post('/stream', { config }, async (request, reply) => {
    await routes.effect(request.idempotent, request.body);
    return reply.type('text/plain').send(Readable.from(['a', 'b']));
  });
  app.post('/slow', { config }, async (request, reply) => {
    await routes.effect(request.idempotent, request.body);
    await request.idempotent.tx.query('SELECT pg_sleep(0.3)');
    return reply.code(201).send({ id: randomUUID() });
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

async function startExpress(idempotency: Idempotency, routes: TestRoutes): Promise<TestServer> {
  const app = express();
  const idempotent = expressIdempotency({ idempotency, scope: (req) => principal(req.headers['x-principal']) });
  const json = express.json({ verify: keepRawBody });
  app.post('/charges', json, idempotent(), async (req, res) => {
    await routes.effect(req.idempotent, req.body);
    res.cookie('a', '1').cookie('b', '2');
    res.status(201).type('application/json').send(chargeBody(req.idempotent.key, req.body));
  });
  app.post('/status/:code', json, idempotent(), async (req, res) => {
    await routes.effect(req.idempotent, req.body);
    res.status(Number(req.params.code)).json({ status: Number(req.params.code), id: randomUUID() });
  });
  app.post('/throw', json, idempotent(), async (req) => {
    await routes.effect(req.idempotent, req.body);
    throw new Error('handler failed on purpose');
  });
  app.post('/deferred', json, idempotent(), async (req, res) => {
    await routes.effect(req.idempotent, req.body);
    await routes.breakCommit(req.idempotent);
    res.status(201).json({ ok: true });
  });
  app.post('/stream', json, idempotent(), async (req, res) => {
    await routes.effect(req.idempotent, req.body);
    res.type('text/plain');
    res.write('a');
    res.end('b');
  });
  app.post('/pipe', json, idempotent(), async (req, res) => {
    await routes.effect(req.idempotent, req.body);
    Readable.from(['a', 'b']).pipe(res);
  });
  app.post('/flush', json, idempotent(), async (req, res) => {
    await routes.effect(req.idempotent, req.body);
    res.flushHeaders();
    res.end('late');
  });
  app.post('/slow', json, idempotent(), async (req, res) => {
    await routes.effect(req.idempotent, req.body);
    await req.idempotent.tx.query('SELECT pg_sleep(0.3)');
    res.status(201).json({ id: randomUUID() });
  });
  // No body parser on this one: the middleware reads the bytes itself.
  app.post('/unparsed', idempotent(), async (req, res) => {
    await routes.effect(req.idempotent, req.body);
    res.status(201).json({ length: (req.body as Buffer).length, id: randomUUID() });
  });
  // Errors answer as plain JSON 500s (Express's default page is HTML with a stack in development).
  app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    const status = (err as { status?: number }).status ?? 500;
    res.status(status).json({ error: err.message, code: (err as { code?: string }).code });
  });
  const server = await new Promise<import('node:http').Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
