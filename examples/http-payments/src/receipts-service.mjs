// @ts-check
// The receipts service: a once Kafka consumer of `charge.created` that writes one `receipts` row
// per charge. The relay may send an event twice (when it dies between Kafka's acknowledgement and
// marking the row sent); the event keeps its outbox id as the message id, so the second copy is
// dropped as a duplicate.

import { PermanentError } from '@once/core';
import { quoteIdentifier } from '@once/core/admin';
import { createKafkaConsumer } from '@once/kafka';

/** The consumer name receipts are recorded under. */
export const RECEIPTS_CONSUMER = 'payments.receipts';

/**
 * The event in a message body; anything else is a PermanentError (dead-lettered at once).
 * @param {Buffer} body
 * @returns {{ chargeId: string, account: string, idempotencyKey: string, amountCents: number }}
 */
export function parseChargeCreated(body) {
  let e;
  try {
    e = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new PermanentError(`the event is not JSON: ${/** @type {Error} */ (err).message}`);
  }
  if (
    e?.type !== 'charge.created' ||
    typeof e.chargeId !== 'string' ||
    typeof e.account !== 'string' ||
    typeof e.idempotencyKey !== 'string' ||
    !Number.isInteger(e.amountCents)
  )
    throw new PermanentError('not a charge.created event');
  return e;
}

/**
 * @param {object} o
 * @param {import('@once/kafka').KafkaClient} o.kafka the once client (../../kafka-client.mjs)
 * @param {import('pg').Pool} o.pool
 * @param {string} o.schema
 * @param {string} o.topic
 * @param {string} o.groupId
 */
export function createReceiptsConsumer({ kafka, pool, schema, topic, groupId }) {
  const s = quoteIdentifier(schema, 'schema');
  return createKafkaConsumer({
    kafka,
    pool,
    schema,
    groupId,
    topics: [topic],
    consumer: RECEIPTS_CONSUMER,
    fromBeginning: true,
    // Short, so a member killed mid-run is dropped from the group within seconds (the broker's
    // group.min.session.timeout.ms must allow it: scripts/services and docker-compose.yml set 1 s).
    sessionTimeoutMs: 3_000,
    heartbeatIntervalMs: 500,
    handler: async (envelope, { tx }) => {
      const e = parseChargeCreated(envelope.body);
      await tx.query(
        `INSERT INTO ${s}.receipts (charge_id, account, idempotency_key, amount_cents, event_id)
         VALUES ($1, $2, $3, $4, $5)`,
        [e.chargeId, e.account, e.idempotencyKey, e.amountCents, envelope.id],
      );
    },
  });
}
