// @ts-check
// The once consumer of the orders topic, shared by the long-running process (consumer.mjs) and
// the short standalone run (main.mjs).
import { createKafkaConsumer } from '@once/kafka';
import { orderHandler } from './orders.mjs';

/**
 * @param {object} o
 * @param {import('@once/kafka').KafkaClient} o.kafka the once client (see ./kafka.mjs's onceClient)
 * @param {import('pg').Pool} o.pool
 * @param {string} o.schema
 * @param {string} o.topic malformed orders go to `<topic>.dlq`
 * @param {string} o.groupId the consumer group, also the name the inbox records claims under
 */
export function createOrdersConsumer({ kafka, pool, schema, topic, groupId }) {
  return createKafkaConsumer({
    kafka,
    pool,
    schema,
    groupId,
    topics: [topic],
    fromBeginning: true,
    // The broker's minimum session: a crashed member's partitions move on after 6 s, not 30.
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 1000,
    handler: orderHandler(schema),
  });
}
