import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { migrate } from '@once/core';
import { createIdempotency, type ProblemFormat, stripeProblemFormat } from '@once/http';
import { idempotentFetch } from '@once/http/fetch';
import { nodeListener } from '@once/http/node';
import type pg from 'pg';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPool, dropSchema, freshSchemaName } from '../../../../test/support/index.js';

// The official Stripe Node SDK against an @once/http server on 127.0.0.1 (issue #26, item 8). The
// SDK sends Idempotency-Key on POSTs and retries 409 and 5xx with it, but throws only for a body
// with an `error` member: with the default problem+json, once's own refusals read as the charge
// asked for; with `formatProblem: stripeProblemFormat` the SDK throws for them.

let pool: pg.Pool;
let schema: string;

beforeAll(async () => {
  pool = createTestPool({ max: 4 });
  schema = freshSchemaName('http_stripe');
  await migrate(pool, { schema });
  await pool.query(`CREATE TABLE "${schema}".charges (seq bigserial PRIMARY KEY, key text, amount int)`);
});
afterAll(async () => {
  await dropSchema(pool, schema);
  await pool.end();
});

/** POST /v1/charges as Stripe answers it, on @once/http/fetch behind @once/http/node. */
async function chargesServer(
  consumer: string,
  formatProblem?: ProblemFormat,
): Promise<{ port: number; server: Server }> {
  const idempotency = createIdempotency({
    pool,
    schema,
    consumer,
    logger: false,
    formatProblem,
    lockTimeoutMs: 200,
  });
  const charges = idempotentFetch(idempotency, {
    scope: (req) => req.headers.get('authorization') ?? 'anonymous',
    handler: async (req, ctx) => {
      const form = new URLSearchParams(await req.text());
      const { rows } = await ctx.tx.query<{ seq: string }>(
        `INSERT INTO "${schema}".charges (key, amount) VALUES ($1, $2) RETURNING seq`,
        [ctx.key, Number(form.get('amount'))],
      );
      const hold = Number(form.get('metadata[hold_ms]') ?? 0);
      if (hold > 0) await new Promise((r) => setTimeout(r, hold));
      return Response.json(
        {
          id: `ch_${rows[0]?.seq}`,
          object: 'charge',
          amount: Number(form.get('amount')),
          currency: form.get('currency'),
        },
        { status: 200 },
      );
    },
  });
  const server = createServer(
    nodeListener(async (req) =>
      new URL(req.url).pathname === '/v1/charges' ? charges(req) : new Response('not found', { status: 404 }),
    ),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, server };
}

const sdk = (port: number) =>
  new Stripe('sk_test_once', {
    host: '127.0.0.1',
    port,
    protocol: 'http',
    maxNetworkRetries: 3,
    telemetry: false,
  });

const effects = async (key: string) =>
  (await pool.query(`SELECT count(*)::int AS n FROM "${schema}".charges WHERE key = $1`, [key])).rows[0]
    .n as number;

describe('the Stripe Node SDK against @once/http', () => {
  const servers: Server[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  it('with stripeProblemFormat, throws StripeError for the 422 of a key reused with other parameters', async () => {
    const { port, server } = await chargesServer('stripe.formatted', stripeProblemFormat);
    servers.push(server);
    const stripe = sdk(port);
    const key = `order-${Math.random().toString(36).slice(2)}`;
    const charge = await stripe.charges.create({ amount: 100, currency: 'usd' }, { idempotencyKey: key });
    expect(charge.id).toMatch(/^ch_\d+$/);
    const again = await stripe.charges.create({ amount: 100, currency: 'usd' }, { idempotencyKey: key });
    expect(again.id).toBe(charge.id);
    expect(again.lastResponse.headers['idempotent-replayed']).toBe('true');
    const refused = await stripe.charges
      .create({ amount: 200, currency: 'usd' }, { idempotencyKey: key })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(refused).toBeInstanceOf(Stripe.errors.StripeError);
    expect((refused as Stripe.errors.StripeError).statusCode).toBe(422);
    expect((refused as Stripe.errors.StripeError).type).toBe('StripeAPIError');
    expect((refused as Stripe.errors.StripeError).raw).toMatchObject({
      type: 'idempotency_error',
      code: 'key-mismatch',
    });
    expect(await effects(key)).toBe(1);
  });

  it('with stripeProblemFormat, throws StripeInvalidRequestError for a key once refuses (400)', async () => {
    const { port, server } = await chargesServer('stripe.formatted2', stripeProblemFormat);
    servers.push(server);
    const refused = await sdk(port)
      .charges.create({ amount: 100, currency: 'usd' }, { idempotencyKey: 'a, b' })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(refused).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect((refused as Stripe.errors.StripeError).statusCode).toBe(400);
  });

  it("accepts Stripe's keys of printable ASCII, and its own retry keys", async () => {
    const { port, server } = await chargesServer('stripe.keys', stripeProblemFormat);
    servers.push(server);
    const stripe = sdk(port);
    for (const key of [`order:${Date.now()}`, `a b/${Date.now()} = @x`]) {
      const first = await stripe.charges.create({ amount: 5, currency: 'usd' }, { idempotencyKey: key });
      const again = await stripe.charges.create({ amount: 5, currency: 'usd' }, { idempotencyKey: key });
      expect(again.id).toBe(first.id);
      expect(await effects(key)).toBe(1);
    }
    // no key given: the SDK makes one (stripe-node-retry-<uuid>) for its retries
    const made = await stripe.charges.create({ amount: 6, currency: 'usd' });
    expect(made.lastResponse.headers['idempotent-replayed']).toBeUndefined();
  });

  it('retries a 409 with the same key and gets the one charge (Retry-After is a hint it does not read)', async () => {
    const { port, server } = await chargesServer('stripe.inflight', stripeProblemFormat);
    servers.push(server);
    const stripe = sdk(port);
    const key = `slow-${Math.random().toString(36).slice(2)}`;
    const params = { amount: 7, currency: 'usd', metadata: { hold_ms: '600' } };
    const [a, b] = await Promise.all([
      stripe.charges.create(params, { idempotencyKey: key }),
      new Promise((r) => setTimeout(r, 100)).then(() =>
        stripe.charges.create(params, { idempotencyKey: key }),
      ),
    ]);
    expect(b.id).toBe(a.id);
    expect(await effects(key)).toBe(1);
  });

  it('with the default problem+json, resolves the 422 as if it were the charge: why the option exists', async () => {
    const { port, server } = await chargesServer('stripe.default');
    servers.push(server);
    const stripe = sdk(port);
    const key = `order-${Math.random().toString(36).slice(2)}`;
    await stripe.charges.create({ amount: 100, currency: 'usd' }, { idempotencyKey: key });
    const mistaken = await stripe.charges.create({ amount: 200, currency: 'usd' }, { idempotencyKey: key });
    expect(mistaken.lastResponse.statusCode).toBe(422);
    expect(mistaken.id).toBeUndefined();
  });
});
