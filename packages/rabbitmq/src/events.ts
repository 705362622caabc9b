import type { Outcome, SerializedError } from '@once/core';
import { TypedEmitter } from '@once/core';
import type { RabbitSettlePlan } from './settle-plan.js';

/** Events of a {@link RabbitConsumer}; core's message events are on `consumer.inbox.on(...)`. */
export interface RabbitEventMap {
  /** A connection and its channels are up and consuming. */
  connected: { reconnects: number };
  /** The connection or a channel was lost; unacked deliveries return to the queue. */
  disconnected: { error: SerializedError | undefined };
  /** A reconnect attempt is scheduled after `delayMs`. */
  'reconnect-scheduled': { attempt: number; delayMs: number; error: SerializedError };
  /** A delivery was settled (acked, sent to a retry tier, dead-lettered, or moved to quarantine). */
  settled: {
    id: string | undefined;
    status: Outcome['status'] | 'quarantined';
    plan: RabbitSettlePlan['kind'] | 'quarantine';
  };
  /** Something went wrong that the consumer handles itself (logged too). Never thrown. */
  error: { error: SerializedError; context: string };
}
export type RabbitEventName = keyof RabbitEventMap;
export type RabbitEventListener<E extends RabbitEventName> = (event: RabbitEventMap[E]) => void;

/** A tiny typed emitter. A throwing listener is logged and ignored; no listener is ever required. */
export class RabbitEvents extends TypedEmitter<RabbitEventMap> {}
