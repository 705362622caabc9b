import type { SerializedError } from '@once/core';
import type { ConsumerEventMap } from '@once/core/adapter';

/**
 * Events of an {@link SqsConsumer}: the events every once consumer emits (`consumer:*`,
 * `message:dead-lettered`, `message:killed-consumer`, `error`) plus SQS's own. Core's per-message
 * events are on `consumer.inbox.on(...)`.
 */
export interface SqsConsumerEventMap extends ConsumerEventMap {
  /** A ReceiveMessage call returned `count` messages, `redelivered` of them with ApproximateReceiveCount above 1. */
  received: { count: number; redelivered: number };
  /** A ReceiveMessage call failed; the loop waits `backoffMs` and tries again. */
  'receive:error': { error: SerializedError; consecutive: number; backoffMs: number };
  /** A delete after commit failed for one message. Harmless: its redelivery is a duplicate. */
  'delete:failed': { messageId: string | undefined; code: string; message: string };
  /** A visibility change (heartbeat, retry delay, release) failed for one message. */
  'visibility:failed': { messageId: string | undefined; code: string; message: string; purpose: string };
  /** A message was held past `maxHeldMs`; it is no longer extended and comes back to whoever receives it. */
  'heartbeat:cap': { messageId: string | undefined; heldMs: number };
}
export type SqsConsumerEventName = keyof SqsConsumerEventMap;
export type SqsConsumerEventListener<E extends SqsConsumerEventName> = (
  event: SqsConsumerEventMap[E],
) => void;

/** The events this consumer adds to the kit's, at run time: `on()` refuses any other name. */
export const SQS_CONSUMER_EVENT_NAMES = Object.freeze({
  received: true,
  'receive:error': true,
  'delete:failed': true,
  'visibility:failed': true,
  'heartbeat:cap': true,
} satisfies Record<Exclude<keyof SqsConsumerEventMap, keyof ConsumerEventMap>, true>);
