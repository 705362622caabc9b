import type { Outcome, SerializedError } from '@once/core';
import type { ConsumerEventMap, SettlePlan } from '@once/core/adapter';

/**
 * Events of a {@link NatsConsumer}: the events every once consumer emits (`consumer:*`,
 * `message:dead-lettered`, `message:killed-consumer`, `error`) plus NATS's own. Core's
 * per-message events are on `consumer.inbox.on(...)`.
 */
export interface NatsConsumerEventMap extends ConsumerEventMap {
  /** The connection is up again after a loss; held messages are kept alive again. */
  connected: {
    /** Successful reconnects since the consumer started, this one included. */
    reconnects: number;
  };
  /** The connection was lost; the client reconnects (forever, when once made the connection). */
  disconnected: {
    /** Why the connection was lost; undefined when the client gave no error. */
    error: SerializedError | undefined;
  };
  /** A delivery was settled: `ack`, `nak` (retry), or dead-lettered and `term`. */
  settled: {
    /** The message id; undefined when the message had no usable one. */
    id: string | undefined;
    /** The outcome's status, as the inbox returned it. */
    status: Outcome['status'];
    /**
     * What was done with the delivery: `ack`, `retry` (nak with a delay), `rerun` or `dead-letter` (term).
     */
    plan: SettlePlan['kind'];
  };
}
/** The name of an event the NATS consumer emits. */
export type NatsConsumerEventName = keyof NatsConsumerEventMap;
/** A listener of the NATS consumer event `E`, called with its payload. */
export type NatsConsumerEventListener<E extends NatsConsumerEventName> = (
  event: NatsConsumerEventMap[E],
) => void;

/** The events this consumer adds to the kit's, at run time: `on()` refuses any other name. */
export const NATS_CONSUMER_EVENT_NAMES = Object.freeze({
  connected: true,
  disconnected: true,
  settled: true,
} satisfies Record<Exclude<keyof NatsConsumerEventMap, keyof ConsumerEventMap>, true>);
