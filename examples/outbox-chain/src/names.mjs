// @ts-check
// Every broker name of one run, derived in one place so the producer, both services, the demo
// and the cleanup agree.

/**
 * @param {string} run unique per run
 */
export function namesFor(run) {
  return {
    /** Kafka topic the orders arrive on. */
    topic: `example-orders-${run}`,
    /** Kafka consumer group of the order service. */
    groupId: `example-orders-${run}`,
    /** RabbitMQ fanout exchange the `order-accepted` events are published to (the outbox destination). */
    exchange: `example-order-accepted-${run}`,
    /** RabbitMQ queue of the shipping service, bound to the exchange. */
    queue: `example-shipping-${run}`,
  };
}
