// @ts-check
// The email consumer: RabbitMQ in lease mode. Sending the mail is an effect outside Postgres, so
// it runs as a durable step: once its result is recorded no later attempt sends again, and the
// one window left (the API delivered, the worker died before recording) is closed by passing the
// step's idempotency key to the API, which answers a repeat with the first result.

import { PermanentError } from '@once/core';
import { quoteIdentifier } from '@once/core/admin';
import { createRabbitConsumer, jsonHandler } from '@once/rabbitmq';
import { sendMail } from './mail-client.mjs';

/** The consumer name emails are recorded under. */
export const EMAIL_CONSUMER = 'example.emails';

/**
 * Retry delay tiers, in ms. A redelivery that meets a live lease is `busy` and waits in the tier
 * that covers the lease's time left; a lost API answer is retried after half a second.
 */
export const RETRY_TIERS_MS = [500, 2_500];

/**
 * The queues the consumer of `queue` reads or fills (its topology, see @once/rabbitmq), without
 * the dead-letter queue `<queue>.dead`.
 * @param {string} queue
 */
export function queuesOf(queue) {
  return [queue, ...RETRY_TIERS_MS.map((ms) => `${queue}.retry.${ms}ms`)];
}

/**
 * @typedef {object} EmailConsumerOptions
 * @property {import('pg').Pool} pool
 * @property {string} schema once's schema, also holding `email_log`
 * @property {string} amqpUrl
 * @property {string} queue
 * @property {string} mailApiUrl
 * @property {number} [concurrency] messages handled at once; default 8
 */

/**
 * The body the handler accepts; anything else is a PermanentError (dead-lettered at once).
 * @param {unknown} v
 * @returns {{ to: string, subject: string, text: string }}
 */
function emailRequest(v) {
  const e = /** @type {Record<string, unknown>} */ (v);
  if (typeof e?.to !== 'string' || typeof e.subject !== 'string' || typeof e.text !== 'string')
    throw new PermanentError('to, subject and text must be strings');
  return /** @type {{ to: string, subject: string, text: string }} */ (e);
}

/**
 * Creates the consumer (not started).
 * @param {EmailConsumerOptions} options
 */
export function createEmailConsumer({ pool, schema, amqpUrl, queue, mailApiUrl, concurrency = 8 }) {
  const s = quoteIdentifier(schema, 'schema');
  return createRabbitConsumer({
    url: amqpUrl,
    queue,
    pool,
    schema,
    consumer: EMAIL_CONSUMER,
    // Short so that a crashed worker's emails are taken over within seconds. RabbitMQ cannot
    // extend a delivery, so lease and handler deadline stay far below its consumer_timeout.
    mode: { lease: { leaseMs: 2_000, heartbeatMs: 500 } },
    handlerTimeoutMs: 10_000,
    retryTiersMs: RETRY_TIERS_MS,
    retryDelayMs: () => 500,
    prefetch: 20,
    concurrency,
    handler: jsonHandler(async (body, _envelope, ctx) => {
      const request = emailRequest(body);
      const sent = await ctx.step('send-mail', ({ idempotencyKey, signal }) =>
        sendMail(mailApiUrl, { ...request, reference: ctx.id }, { idempotencyKey, signal }),
      );
      // Commits with the message's `done`, once: the provider's id kept for support questions.
      await ctx.tx.query(`INSERT INTO ${s}.email_log (message_id, provider_email_id) VALUES ($1, $2)`, [
        ctx.id,
        sent.id,
      ]);
    }),
  });
}
