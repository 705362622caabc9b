/**
 * The broker's own liveness for one delivery, exposed by an adapter so that lease mode runs on
 * one clock: each time core renews a message's lease (when it claims the message, at each
 * heartbeat, at each step), it calls {@link Liveness.extend} with the lease length, and the
 * adapter keeps the delivery alive at the broker for that long from now.
 *
 * - SQS: `ChangeMessageVisibility` of the receipt handle to `ceil(ms / 1000)` seconds (at most
 *   43200), and no visibility timer of the adapter's own for that message.
 * - Kafka: the consumer group session (`heartbeat()` of eachBatch); kafkajs throttles it.
 * - RabbitMQ: nothing can be extended (consumer_timeout is per delivery, set on the broker or
 *   the queue); `extend` may be a no-op, and `leaseMs` plus the handler's deadline must stay
 *   below the consumer timeout.
 *
 * Core awaits nothing from it while a handler runs: a rejection is logged and ignored (the lease,
 * not the broker, decides who may write).
 */
export interface Liveness {
  /** Keep this delivery alive at the broker for at least `ms` more milliseconds. */
  extend(ms: number): Promise<void> | void;
}
