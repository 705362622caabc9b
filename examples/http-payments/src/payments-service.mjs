// @ts-check
// The payments service: `POST /charges` with an Idempotency-Key, on @once/http's Fetch binding.
// The key's claim, the `charges` row, the `charge.created` event (ctx.publish writes it into the
// outbox) and the stored 201 commit in one transaction, and the client gets the 201 only after
// COMMIT. A retry with the same key (after a lost response, or from a concurrent duplicate) gets
// the stored 201 back; a SIGKILL before COMMIT leaves nothing, so the retry charges once. The
// relay sends the outbox's events to Kafka.

import { randomUUID } from 'node:crypto';
import { createOutbox, createRelay } from '@once/core';
import { quoteIdentifier } from '@once/core/admin';
import { createIdempotency } from '@once/http';
import { idempotentFetch } from '@once/http/fetch';
import { createKafkaPublisher } from '@once/kafka';
import { accountOf } from './accounts.mjs';

/** The consumer name the keys are recorded under in once's inbox (`once inspect` shows it). */
export const PAYMENTS_CONSUMER = 'payments.http';

/**
 * @typedef {object} PaymentsServiceOptions
 * @property {import('pg').Pool} pool
 * @property {string} schema once's schema, also holding `charges`
 * @property {import('@once/kafka').KafkaClient} kafka the once client (../../kafka-client.mjs)
 * @property {string} topic where `charge.created` events go
 */

/** @param {number} status @param {string} title @param {Record<string, string>} [headers] */
const problem = (status, title, headers = {}) =>
  Response.json(
    { type: 'about:blank', title, status },
    { status, headers: { 'content-type': 'application/problem+json', ...headers } },
  );

/**
 * The charge in a request body, or a message saying what is wrong with it.
 * @param {unknown} b
 * @returns {{ amountCents: number, currency: string, description: string } | string}
 */
export function parseCharge(b) {
  const o = /** @type {Record<string, unknown> | null} */ (typeof b === 'object' ? b : null);
  if (!o || !Number.isInteger(o.amountCents) || /** @type {number} */ (o.amountCents) <= 0)
    return 'amountCents must be a positive integer';
  if (typeof o.currency !== 'string' || !/^[a-z]{3}$/.test(o.currency))
    return 'currency must be a three-letter lower-case code';
  if (o.description !== undefined && typeof o.description !== 'string') return 'description must be a string';
  return {
    amountCents: /** @type {number} */ (o.amountCents),
    currency: o.currency,
    description: /** @type {string | undefined} */ (o.description) ?? '',
  };
}

/**
 * Creates the service's Fetch handler, its relay and the relay's Kafka publisher (the relay not
 * started).
 * @param {PaymentsServiceOptions} options
 */
export function createPaymentsService({ pool, schema, kafka, topic }) {
  const s = quoteIdentifier(schema, 'schema');
  const outbox = createOutbox({ pool, schema, destinations: [topic] });
  const idempotency = createIdempotency({ pool, schema, outbox, consumer: PAYMENTS_CONSUMER });

  const createCharge = idempotentFetch(idempotency, {
    route: 'POST /charges',
    // The principal: the account the bearer token authenticated (checked in `fetch` below, before
    // this runs). Never a header the client may set to anything, or one client could replay
    // another's charge by guessing its key.
    scope: (req) => accountOf(req.headers.get('authorization')) ?? '',
    handler: async (req, ctx) => {
      let body;
      try {
        body = await req.json();
      } catch {
        return problem(400, 'the body must be JSON');
      }
      const charge = parseCharge(body);
      // A 400 is stored with the key: the same request again gets the same 400.
      if (typeof charge === 'string') return problem(400, charge);
      const account = ctx.scope;
      const chargeId = `ch_${randomUUID()}`;
      const event = {
        type: 'charge.created',
        chargeId,
        account,
        idempotencyKey: ctx.key,
        amountCents: charge.amountCents,
        currency: charge.currency,
      };
      // Into the outbox, in this transaction. No ordering key: charges are independent, and the
      // relay sends a key's events one at a time (by account, three accounts would be three lanes).
      const eventId = await ctx.publish(topic, event);
      await ctx.tx.query(
        `INSERT INTO ${s}.charges (charge_id, account, idempotency_key, amount_cents, currency, description, event_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [chargeId, account, ctx.key, charge.amountCents, charge.currency, charge.description, eventId],
      );
      return Response.json(
        { id: chargeId, object: 'charge', status: 'succeeded', account, ...charge, event: eventId },
        { status: 201, headers: { location: `/charges/${chargeId}` } },
      );
    },
  });

  /**
   * The service's routes: only `POST /charges`, for an authenticated account.
   * @param {Request} req
   * @returns {Promise<Response>}
   */
  const fetch = async (req) => {
    if (new URL(req.url).pathname !== '/charges') return problem(404, 'not found');
    if (req.method !== 'POST') return problem(405, 'only POST', { allow: 'POST' });
    if (!accountOf(req.headers.get('authorization')))
      return problem(401, 'a valid bearer token is required', { 'www-authenticate': 'Bearer' });
    return createCharge(req);
  };

  const publisher = createKafkaPublisher({ kafka });
  const relay = createRelay({ pool, schema, publishers: { [topic]: publisher }, pollIntervalMs: 100 });
  return {
    idempotency,
    fetch,
    relay,
    /** Stops the relay (after the HTTP server stopped taking requests) and its producer. */
    async stop() {
      await relay.stop();
      await publisher.stop();
    },
  };
}
