import type { Outcome, SerializedError } from '@once/core';
import type { ConsumerEventMap, DeadLetterRecord } from '@once/core/adapter';

/** What the consumer does with a delivery once core's plan is known, in RabbitMQ's terms. */
export type RabbitSettlePlan =
  | { kind: 'ack' }
  /** Republish to the retry queue of `tierMs` with `attempt` in our header, then ack. */
  | { kind: 'retry'; tierMs: number; attempt: number }
  /** Run again from our prefetch window, at once: an earlier message stopped it. */
  | { kind: 'rerun' }
  /** Publish to the dead-letter exchange with the record in a header, then ack. */
  | { kind: 'dead-letter'; record: DeadLetterRecord };

/**
 * Events of a {@link RabbitConsumer}: the events every once consumer emits (`consumer:*`,
 * `message:dead-lettered`, `message:killed-consumer`, `error`) plus RabbitMQ's own. Core's
 * per-message events are on `consumer.inbox.on(...)`.
 */
export interface RabbitConsumerEventMap extends ConsumerEventMap {
  /** A connection and its channel are up (and consuming, unless the database is unusable). */
  connected: { reconnects: number };
  /** The connection or its channel was lost; unacked deliveries return to the queue. */
  disconnected: { error: SerializedError | undefined };
  /** A reconnect attempt is scheduled after `delayMs`. */
  'reconnect-scheduled': { attempt: number; delayMs: number; error: SerializedError };
  /** A delivery was settled: acked, sent to a retry tier, or dead-lettered. */
  settled: {
    id: string | undefined;
    status: Outcome['status'];
    plan: RabbitSettlePlan['kind'];
  };
}
export type RabbitConsumerEventName = keyof RabbitConsumerEventMap;
export type RabbitConsumerEventListener<E extends RabbitConsumerEventName> = (
  event: RabbitConsumerEventMap[E],
) => void;

/** The events this consumer adds to the kit's, at run time: `on()` refuses any other name. */
export const RABBIT_CONSUMER_EVENT_NAMES = Object.freeze({
  connected: true,
  disconnected: true,
  'reconnect-scheduled': true,
  settled: true,
} satisfies Record<Exclude<keyof RabbitConsumerEventMap, keyof ConsumerEventMap>, true>);
