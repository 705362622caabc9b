// @ts-check
// The once consumer of the payments queue, shared by the long-running process (consumer.mjs) and
// the short standalone run (main.mjs).
import { createSqsConsumer } from '@once/sqs';
import { debitHandler } from './payments.mjs';

/**
 * @param {object} o
 * @param {import('@aws-sdk/client-sqs').SQSClient} o.client
 * @param {import('pg').Pool} o.pool
 * @param {string} o.schema
 * @param {string} o.queueUrl
 * @param {string} o.deadLetterUrl malformed payments go there at once
 * @param {string} [o.consumer] the name the inbox records claims under
 * @param {number} [o.visibilityTimeoutS] how long a received message stays hidden (extended by a
 *   heartbeat while held); also how soon a crashed consumer's messages come back
 */
export function createPaymentsConsumer({
  client,
  pool,
  schema,
  queueUrl,
  deadLetterUrl,
  consumer,
  visibilityTimeoutS,
}) {
  return createSqsConsumer({
    client,
    queueUrl,
    pool,
    schema,
    consumer: consumer ?? 'example.payments',
    deadLetterQueueUrl: deadLetterUrl,
    // Short polls so a stop or the end of a run is not held by a 20 s long poll.
    waitTimeSeconds: 1,
    // One transaction per receive (up to ten messages, each group in order): fewer commits.
    batch: true,
    visibilityTimeoutS: visibilityTimeoutS ?? 30,
    handler: debitHandler(schema),
  });
}
