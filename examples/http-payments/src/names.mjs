// @ts-check
// Every name of one run, derived in one place so the services, the demo and the cleanup agree.

/** @param {string} run unique per run */
export function namesFor(run) {
  return {
    /** Kafka topic the `charge.created` events go to (the outbox destination). */
    topic: `example-charges-${run}`,
    /** Kafka consumer group of the receipts service. */
    groupId: `example-receipts-${run}`,
  };
}
