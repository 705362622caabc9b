import type { Outcome, SerializedError } from '@once/core';
import type { ConsumerEventMap, SettlePlan } from '@once/core/adapter';

/**
 * Events of a {@link NatsConsumer}: the events every once consumer emits (`consumer:*`,
 * `message:dead-lettered`, `message:killed-consumer`, `error`) plus NATS's own. Core's
 * per-message events are on `consumer.inbox.on(...)`.
 */
export interface NatsConsumerEventMap extends ConsumerEventMap {
  /** The connection is up again after a loss; held messages are kept alive again. */
  connected: { reconnects: number };
  /** The connection was lost; the client reconnects (forever, when once made the connection). */
  disconnected: { error: SerializedError | undefined };
  /** A delivery was settled: `ack`, `nak` (retry), or dead-lettered and `term`. */
  settled: {
    id: string | undefined;
    status: Outcome['status'];
    plan: SettlePlan['kind'];
  };
}
export type NatsConsumerEventName = keyof NatsConsumerEventMap;
export type NatsConsumerEventListener<E extends NatsConsumerEventName> = (
  event: NatsConsumerEventMap[E],
) => void;

/** The events this consumer adds to the kit's, at run time: `on()` refuses any other name. */
export const NATS_CONSUMER_EVENT_NAMES = Object.freeze({
  connected: true,
  disconnected: true,
  settled: true,
} satisfies Record<Exclude<keyof NatsConsumerEventMap, keyof ConsumerEventMap>, true>);
